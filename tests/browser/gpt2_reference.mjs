// GPT-2's ids for a file, by npm's gpt-3-encoder (OpenAI's encoder.py in JavaScript), as a
// JSON array on stdout: the reference tests/unit/test_gpt2_tokenizer.cpp holds tinylm's
// gpt2 tokenizer to.
//   node tests/browser/gpt2_reference.mjs FILE [BYTES]
// With BYTES, only the file's first BYTES bytes, cut after the last "\n" among them.
// On a whole megabyte gpt-3-encoder takes minutes, so the text goes in pieces cut after a
// "\n" that has a non-space on each side. No pre-token crosses such a cut (only a space, not
// a newline, joins the word after it; the lone "\n" is one piece either way), so the ids are
// those of the whole text.
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

const { encode } = createRequire(import.meta.url)("gpt-3-encoder");
let bytes = readFileSync(process.argv[2]);
if (process.argv[3] && bytes.length > Number(process.argv[3]))
  bytes = bytes.subarray(0, bytes.lastIndexOf(10, Number(process.argv[3]) - 1) + 1);
const text = bytes.toString("utf8");
const ids = [];
let from = 0;
for (const m of text.matchAll(/(?<=\S\n)(?=\S)/g)) {
  if (m.index - from < 4096) continue;  // pieces of a few kilobytes
  for (const id of encode(text.slice(from, m.index))) ids.push(id);
  from = m.index;
}
for (const id of encode(text.slice(from))) ids.push(id);
process.stdout.write(JSON.stringify(ids) + "\n");
