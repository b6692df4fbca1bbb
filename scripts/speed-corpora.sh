#!/usr/bin/env bash
# The corpora of docs/MEASUREMENTS.md's speed tables, built from what this machine has, into
# DIR (default /tmp/tinylm-corpora); prints each file's size and sha256 so that a table can
# say which text it ran on. None of it is committed.
#
#   scripts/speed-corpora.sh [DIR]
#
#   tinyshakespeare.txt  1.1 MB  verse and dialogue (shipped, data/corpora/)
#   botchan.txt          0.27 MB English prose, a novel in translation (shipped; without
#                        its byte-order mark and CRs)
#   gnu_info.txt         ~4.8 MB technical manuals: every GNU info manual Debian installed
#                        (/usr/share/info/*.gz), printable ASCII and newlines kept; the corpus
#                        where 700 steps of 768 tokens see a tenth of the text
#   vim_docs.txt         2.0 MB  Vim's help files (/usr/share/vim/vim*/doc/*.txt), the same
#                        filter, the first 2,000,000 bytes
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-/tmp/tinylm-corpora}
mkdir -p "$out"
cp "$here/data/corpora/tinyshakespeare.txt" "$out/"
# Python reads text with universal newlines, so nanoGPT never sees botchan's CRLF and BOM;
# tinylm reads bytes. Both get the same characters when the file has neither.
sed '1s/^\xEF\xBB\xBF//' "$here/data/corpora/botchan.txt" | tr -d '\r' > "$out/botchan.txt"

ascii() {  # stdin -> printable ASCII and newlines
  LC_ALL=C tr -cd '\n\040-\176'
}
shopt -s nullglob
info=(/usr/share/info/*.gz)
if [ ${#info[@]} -gt 0 ]; then
  zcat "${info[@]}" | ascii > "$out/gnu_info.txt"
else
  echo "speed-corpora: no /usr/share/info/*.gz here, gnu_info.txt not built" >&2
fi
vim=(/usr/share/vim/vim*/doc/*.txt)
if [ ${#vim[@]} -gt 0 ]; then
  cat "${vim[@]}" | ascii > "$out/vim_docs.all"
  head -c 2000000 "$out/vim_docs.all" > "$out/vim_docs.txt"
  rm "$out/vim_docs.all"
else
  echo "speed-corpora: no Vim help files here, vim_docs.txt not built" >&2
fi
for f in "$out"/*.txt; do
  printf '%s %s %s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)"
done
