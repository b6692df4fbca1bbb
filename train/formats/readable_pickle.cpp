#include "train/formats/readable_pickle.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <regex>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tinylm {
namespace fs = std::filesystem;

namespace {

// A value on the pickle machine's stack, as far as the rewrite and the cycle checks need it.
struct Entry {
  size_t begin;            // where in the output its opcodes begin (SETITEM's MARK goes there)
  bool mark = false;       // a MARK, not a value
  bool container = false;  // a dict or list, or a tuple holding one: it must not be shared
  bool maker = false;      // a torch.jit._pickle function, whose result is its argument
};

std::string little_endian_u32(uint64_t v) {
  std::string b(4, '\0');
  for (size_t i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i) & 0xff);
  return b;
}

class Rewriter {
 public:
  Rewriter(const std::string& in, const fs::path& path, PickleSource source)
      : in_(in), path_(path), archive_(source == PickleSource::kTorchArchive) {}

  std::string run() {
    if (in_.size() < 2 || in_[0] != '\x80') fail("not a pickle of protocol 2 or later");
    out_ = "\x80\x02";
    at_ = 2;
    while (at_ < in_.size()) {
      op_ = static_cast<unsigned char>(in_[at_++]);
      begin_ = out_.size();
      if (op_ == '.') return out_ + '.';  // STOP
      step();
    }
    fail("the pickle has no STOP");
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(path_.string() + ": " + what);
  }
  [[noreturn]] void broken() const { fail("the pickle's stack does not add up"); }

  void step() {
    switch (op_) {
      case 0x95: at_ += 8; break;  // FRAME
      case 0x94:                   // MEMOIZE
        put(memo_size_);
        out_ += 'r' + little_endian_u32(memo_size_ - 1);
        break;
      case 'q':  // BINPUT, LONG_BINPUT
      case 'r': {
        const size_t n = op_ == 'q' ? 1 : 4;
        const auto index = static_cast<uint32_t>(little(at_, n));
        // Writers number the memo from 0, one entry per put of at least a byte: a larger index
        // is damage, and LibTorch's unpickler would size its memo to it (gigabytes).
        if (index >= in_.size())
          fail("the pickle's memo index " + std::to_string(index) +
               " is past anything it could hold");
        put(index);
        keep(n);
        break;
      }
      case 'p': {  // PUT
        const size_t end = line_end(1);
        put(line_index(end));
        keep(end - at_);
        break;
      }
      case 'h':  // BINGET, LONG_BINGET
      case 'j': {
        const size_t n = op_ == 'h' ? 1 : 4;
        const auto index = static_cast<uint32_t>(little(at_, n));
        if (static_cast<int64_t>(index) == ordered_dict_) {  // the OrderedDict class again
          at_ += n;
          empty_dict();
        } else {
          get(index);
          keep(n);
        }
        break;
      }
      case 'g': {  // GET
        const size_t end = line_end(1);
        get(line_index(end));
        keep(end - at_);
        break;
      }
      case 0x8c: text(1), push_value(); break;  // SHORT_BINUNICODE
      case 0x8d: text(8), push_value(); break;  // BINUNICODE8
      case 'X': text(4), push_value(); break;   // BINUNICODE
      case 'c': global(); break;                // GLOBAL
      case 'K': keep(1), push_value(); break;   // BININT1
      case 'M': keep(2), push_value(); break;   // BININT2
      case 'J': keep(4), push_value(); break;   // BININT
      case 'G': keep(8), push_value(); break;   // BINFLOAT
      case 0x8a:  // LONG1, SHORT_BINSTRING, SHORT_BINBYTES: a 1-byte length, then the bytes
      case 'U':
      case 'C': keep(1 + static_cast<size_t>(little(at_, 1))), push_value(); break;
      case 'T':  // BINSTRING, BINBYTES: a 4-byte length
      case 'B': keep(4 + static_cast<size_t>(little(at_, 4))), push_value(); break;
      case 'I':  // INT, FLOAT, LONG, STRING, UNICODE: one line
      case 'F':
      case 'L':
      case 'S':
      case 'V': keep(line_end(1) - at_), push_value(); break;
      case 'P':  // PERSID
        archive_only("PERSID");
        keep(line_end(1) - at_), push_value();
        break;
      case '}':  // EMPTY_DICT, EMPTY_LIST
      case ']': keep(0), push_value(true); break;
      case ')':  // EMPTY_TUPLE, NONE, NEWTRUE, NEWFALSE
      case 'N':
      case 0x88:
      case 0x89: keep(0), push_value(); break;
      case '(': keep(0), push_mark(); break;  // MARK
      case 'u':                               // SETITEMS, APPENDS, POP_MARK
      case 'e':
      case '1': keep(0), pop_mark(); break;
      case 'd':  // DICT, LIST: from the MARK on
      case 'l': {
        keep(0);
        Entry made = pop_mark();
        made.container = true;
        push(made);
        break;
      }
      case 't': keep(0), push(pop_mark()); break;  // TUPLE
      case 's':                                    // SETITEM: MARK before the key, SETITEMS
        if (stack_.size() < 3) broken();
        out_.insert(stack_[stack_.size() - 2].begin, 1, '(');
        out_ += 'u';
        pop(2);
        break;
      case 'a':  // APPEND, POP
      case '0': keep(0), pop(1); break;
      case 'b': build(); break;  // BUILD
      case 'R':                  // REDUCE, NEWOBJ: callable and arguments -> the result
      case 0x81: {
        if (stack_.size() < 2) broken();
        const bool maker = stack_[stack_.size() - 2].maker;
        keep(0);
        Entry made = pop(2);
        made.container = maker;
        push(made);
        break;
      }
      case 'Q':  // BINPERSID
        archive_only("BINPERSID");
        {
          keep(0);
          Entry made = pop(1);
          made.container = false;
          push(made);
          break;
        }
      case 0x85: keep(0), push(pop(1)); break;  // TUPLE1, TUPLE2, TUPLE3
      case 0x86: keep(0), push(pop(2)); break;
      case 0x87: keep(0), push(pop(3)); break;
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op_);
        fail(std::string("the pickle uses opcode ") + hex + " at byte " + std::to_string(at_ - 1) +
             ", which tinylm does not read");
      }
    }
  }

  // GLOBAL module\nname\n. OrderedDict() becomes {}; the other imports are those of
  // torch.save and of LibTorch's pickler. Any other could make a value that shares a dict.
  void global() {
    const size_t end = line_end(2);
    const size_t module_end = in_.find('\n', at_);
    const std::string module = in_.substr(at_, module_end - at_);
    const std::string name = in_.substr(module_end + 1, end - 2 - module_end);
    if (module == "collections" && name == "OrderedDict") {
      at_ = end;
      if (at_ < in_.size() && (in_[at_] == 'q' || in_[at_] == 'r')) {  // memoized: BINGET later
        const size_t n = in_[at_] == 'q' ? 1 : 4;
        ordered_dict_ = static_cast<int64_t>(little(at_ + 1, n));
        at_ += 1 + n;
      }
      empty_dict();
      return;
    }
    if (module != "torch" && module != "torch._utils" && module != "torch.jit._pickle") {
      fail("the pickle imports " + module + "." + name +
           ", which tinylm does not read (it reads what torch.save and LibTorch write: "
           "tensors, dicts, lists and plain values)");
    }
    keep(end - at_);
    push_value(false, module == "torch.jit._pickle");
  }

  // `OrderedDict ()` REDUCE, the class just read, as an empty dict.
  void empty_dict() {
    if (in_.compare(at_, 2, ")R") != 0)
      fail("the pickle builds an OrderedDict other than with no arguments");
    at_ += 2;
    out_ += '}';
    push_value(true);
  }

  // In a torch.save archive the state's opcodes are cut out, and what they memoized.
  void build() {
    archive_only("BUILD");
    if (stack_.empty()) broken();
    const size_t state = stack_.back().begin;
    while (!puts_.empty() && puts_.back().first >= state) {
      dropped_.insert(puts_.back().second);
      puts_.pop_back();
    }
    out_.resize(state);
    pop(1);
  }

  void put(uint32_t index) {
    if (stack_.empty() || stack_.back().mark) broken();
    memo_size_ = std::max(memo_size_, index + 1);
    puts_.emplace_back(begin_, index);
    if (stack_.back().container)
      containers_.insert(index);
    else
      containers_.erase(index);
    if (stack_.back().maker)
      makers_.insert(index);
    else
      makers_.erase(index);
  }

  // A memo get may not fetch a dict or list (or a tuple holding one): a second reference to
  // one is how a pickle builds a cycle (a dict inside itself), which LibTorch never frees.
  // Python writes one only for an object referred to twice, which neither meta.pkl nor a
  // checkpoint holds.
  void get(uint32_t index) {
    if (dropped_.count(index) != 0)
      fail("the pickle refers to a value inside an OrderedDict's dropped state");
    if (containers_.count(index) != 0)
      fail("the pickle refers to one dict or list twice (memo index " + std::to_string(index) +
           "), which tinylm does not read");
    push_value(false, makers_.count(index) != 0);
  }

  void archive_only(const char* opcode) const {
    if (!archive_)
      fail(std::string("the pickle uses ") + opcode +
           ", which tinylm reads only in a torch.save checkpoint");
  }

  // A value, or a MARK, that begins with this opcode; a value made of popped ones.
  void push_value(bool container = false, bool maker = false) {
    stack_.push_back(Entry{begin_, false, container, maker});
  }
  void push_mark() { stack_.push_back(Entry{begin_, true}); }
  void push(const Entry& made) { stack_.push_back(made); }

  // The top n values, as one: where the first began, and whether any is a container.
  Entry pop(size_t n) {
    if (stack_.size() < n) broken();
    Entry joined{n > 0 ? stack_[stack_.size() - n].begin : begin_};
    for (size_t i = stack_.size() - n; i < stack_.size(); ++i) {
      if (stack_[i].mark) broken();
      joined.container = joined.container || stack_[i].container;
    }
    stack_.resize(stack_.size() - n);
    return joined;
  }

  // Everything down to the last MARK, and the MARK, as one value that begins at the MARK.
  Entry pop_mark() {
    Entry joined{0};
    while (!stack_.empty() && !stack_.back().mark) {
      joined.container = joined.container || stack_.back().container;
      stack_.pop_back();
    }
    if (stack_.empty()) broken();
    joined.begin = stack_.back().begin;
    stack_.pop_back();
    return joined;
  }

  // The opcode and n bytes of operand, as they are.
  void keep(size_t n) {
    if (at_ + n > in_.size()) fail("the pickle ends inside an opcode");
    out_ += static_cast<char>(op_);
    out_.append(in_, at_, n);
    at_ += n;
  }

  uint64_t little(size_t at, size_t n) const {
    if (at + n > in_.size()) fail("the pickle ends inside an opcode");
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | static_cast<unsigned char>(in_[at + i]);
    return v;
  }

  // Where operands ended by `count` newlines end (GLOBAL has two).
  size_t line_end(int count) const {
    size_t end = at_;
    for (int i = 0; i < count; ++i) {
      end = in_.find('\n', end);
      if (end == std::string::npos) fail("the pickle ends inside an opcode");
      ++end;
    }
    return end;
  }

  // PUT's and GET's decimal operand, the line from here to end.
  uint32_t line_index(size_t end) const {
    const std::string digits = in_.substr(at_, end - 1 - at_);
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos)
      fail("the pickle's memo index '" + digits + "' is not a number");
    const auto index = static_cast<uint32_t>(std::stoul(digits));
    if (index >= in_.size())
      fail("the pickle's memo index " + digits + " is past anything it could hold");
    return index;
  }

  // A string, as BINUNICODE.
  void text(size_t length_bytes) {
    const uint64_t n = little(at_, length_bytes);
    at_ += length_bytes;
    if (n > in_.size() - at_) fail("the pickle ends inside a string");
    std::string value = in_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    // A storage's location: a checkpoint trained on a GPU is read onto the CPU (what
    // torch.load's map_location does; pickle_load has none).
    static const std::regex cuda("cuda(:[0-9]+)?");
    if (archive_ && std::regex_match(value, cuda)) value = "cpu";
    out_ += 'X' + little_endian_u32(value.size()) + value;
  }

  const std::string& in_;
  const fs::path& path_;
  const bool archive_;
  std::string out_;
  size_t at_ = 0;     // in `in_`
  size_t begin_ = 0;  // where in `out_` the current opcode's output begins
  unsigned char op_ = 0;
  std::vector<Entry> stack_;
  uint32_t memo_size_ = 0;
  int64_t ordered_dict_ = -1;                      // the memo index of the OrderedDict class
  std::vector<std::pair<size_t, uint32_t>> puts_;  // where in `out_` each memo index was set
  std::set<uint32_t> dropped_;                     // memo indices set inside a dropped state
  std::set<uint32_t> containers_;                  // memo indices that must not be fetched
  std::set<uint32_t> makers_;                      // memo indices of torch.jit._pickle's
};

}  // namespace

std::string readable_pickle(const std::string& pickle, const fs::path& path, PickleSource source) {
  return Rewriter(pickle, path, source).run();
}

}  // namespace tinylm
