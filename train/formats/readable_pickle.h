#pragma once
// Python's pickles, rewritten for LibTorch 1.13's unpickler, which reads protocol 2 only,
// knows no OrderedDict (the type of every state_dict(): pytorch#100741, fixed in PyTorch 2.6)
// and no SETITEM. From protocols 3 to 5, which Python writes by default (as nanoGPT's
// prepare.py does): FRAME is dropped (framing only), MEMOIZE becomes LONG_BINPUT with its
// memo index, SHORT_BINUNICODE and BINUNICODE8 become BINUNICODE. `OrderedDict ()` REDUCE
// becomes an empty dict, which the items then fill. SETITEM becomes MARK key value SETITEMS.
// For the data.pkl of a torch.save archive: each BUILD and its state (an OrderedDict's
// _metadata) are cut out (LibTorch has no POP), and "cuda" locations become "cpu". Every
// other opcode is kept, operands and all.
//
// Refused, with an error naming the file and what was wrong: an opcode this reader does not
// know (DUP among them, which Python never writes); damage (a stack that does not add up, a
// memo index past the file's size, which LibTorch would allocate for); and whatever could
// build a reference cycle, which LibTorch's reference-counted values never free: a second
// reference to a dict or list (or to a tuple holding one), and imports other than those of
// torch.save and LibTorch's own pickler (torch, torch._utils, torch.jit._pickle,
// collections.OrderedDict).

#include <filesystem>
#include <string>

namespace tinylm {

enum class PickleSource {
  kPlain,         // meta.pkl: dicts, lists and plain values
  kTorchArchive,  // data.pkl of a torch.save zip: tensors too
};

std::string readable_pickle(const std::string& pickle, const std::filesystem::path& path,
                            PickleSource source);

}  // namespace tinylm
