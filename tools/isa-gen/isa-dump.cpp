// isa-dump: sweeps AMDGPU encoding formats through LLVM's in-process MC disassembler and
// writes the opcode tables used by crates/amdgpu-isa (see tools/isa-gen/README.md).
//
// Usage:
//   isa-dump ops   <mcpu> <family> <formats.tsv>   -> opcode table on stdout
//   isa-dump sregs <mcpu> <family> <formats.tsv>   -> scalar operand names (values 0..255)
//   isa-dump pairs <mcpu> <family> <formats.tsv>   -> two-part (VOP3PX2) instructions
//   isa-dump words <mcpu> <hexword>...              -> debug: decode one instruction
//
// Facts come from LLVM's AMDGPU MC layer only: MCDisassembler (does the word decode, to which
// MC opcode, with which size), MCInstPrinter (mnemonic, register names), MCInstrDesc (flags,
// implicit uses/defs, TSFlags).
#include "llvm/MC/MCAsmInfo.h"
#include "llvm/MC/MCContext.h"
#include "llvm/MC/MCDisassembler/MCDisassembler.h"
#include "llvm/MC/MCInst.h"
#include "llvm/MC/MCInstPrinter.h"
#include "llvm/MC/MCInstrInfo.h"
#include "llvm/MC/MCRegisterInfo.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/MCTargetOptions.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"
#include <algorithm>
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace llvm;

extern "C" void LLVMInitializeAMDGPUTargetInfo();
extern "C" void LLVMInitializeAMDGPUTargetMC();
extern "C" void LLVMInitializeAMDGPUDisassembler();

struct Bits { int dw, hi, lo; };
struct Field { std::string name; Bits b; std::string kind; long tpl; };
struct Format {
  std::string family, name; int dwords; uint32_t mask, value;
  std::vector<Bits> op; std::vector<Field> fields;
  std::vector<std::vector<std::pair<std::string,long>>> probes; // each probe: set of assignments
  std::vector<std::string> probeNames;
  std::vector<std::vector<std::pair<std::string,long>>> alts;
  // Tried only after every zero subset (alone, then with each subset): mode bits such as the
  // DS `gds` bit that select a different opcode meaning only where nothing else decodes.
  std::vector<std::vector<std::pair<std::string,long>>> lateAlts;
  int opBits() const { int n = 0; for (auto &b : op) n += b.hi - b.lo + 1; return n; }
};

static std::vector<std::string> split(const std::string &s, char c) {
  std::vector<std::string> r; std::string cur; std::stringstream ss(s);
  while (std::getline(ss, cur, c)) r.push_back(cur);
  return r;
}
static Bits parseBits(const std::string &s) {
  auto p = split(s, ':'); return {std::stoi(p[0]), std::stoi(p[1]), std::stoi(p[2])};
}
static std::vector<std::pair<std::string,long>> parseAssign(const std::string &s, char sep) {
  std::vector<std::pair<std::string,long>> r;
  for (auto &a : split(s, sep)) { if (a.empty()) continue; auto e = a.find('=');
    r.push_back({a.substr(0, e), std::stol(a.substr(e + 1), nullptr, 0)}); }
  return r;
}

static std::vector<Format> loadFormats(const char *path) {
  std::ifstream in(path); std::string line; std::vector<Format> out;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto c = split(line, '\t');
    while (c.size() < 9) c.push_back("");
    Format f; f.family = c[0]; f.name = c[1]; f.dwords = std::stoi(c[2]);
    auto mv = split(c[3], '/'); f.mask = std::stoul(mv[0], nullptr, 16); f.value = std::stoul(mv[1], nullptr, 16);
    for (auto &b : split(c[4], ',')) if (!b.empty()) f.op.push_back(parseBits(b));
    for (auto &fs : split(c[5], ',')) { if (fs.empty()) continue;
      auto at = fs.find('@'); auto eq = fs.find('=');
      Field fd; fd.name = fs.substr(0, at);
      std::string rest = fs.substr(at + 1, (eq == std::string::npos ? fs.size() : eq) - at - 1);
      auto p = split(rest, ':'); fd.b = {std::stoi(p[0]), std::stoi(p[1]), std::stoi(p[2])}; fd.kind = p[3];
      fd.tpl = eq == std::string::npos ? 0 : std::stol(fs.substr(eq + 1), nullptr, 0);
      f.fields.push_back(fd); }
    for (auto &p : split(c[6], ',')) if (!p.empty()) { f.probeNames.push_back(p); f.probes.push_back(parseAssign(p, '+')); }
    // Alternatives: "a|b" (in order), then after "||" the late ones.
    size_t late = c[7].find("||");
    for (auto &a : split(c[7].substr(0, late), '|')) if (!a.empty()) f.alts.push_back(parseAssign(a, ';'));
    if (late != std::string::npos)
      for (auto &a : split(c[7].substr(late + 2), '|')) if (!a.empty()) f.lateAlts.push_back(parseAssign(a, ';'));
    out.push_back(f);
  }
  return out;
}

static void setBits(uint32_t *w, Bits b, uint64_t v) {
  int n = b.hi - b.lo + 1; uint32_t m = (n == 32 ? 0xffffffffu : ((1u << n) - 1)) << b.lo;
  w[b.dw] = (w[b.dw] & ~m) | ((uint32_t(v) << b.lo) & m);
}

// LLVM 22 crashes on a few invalid words (e.g. gfx12 s_barrier_signal with a literal). Each
// decode runs under this guard; a crash counts as "does not decode".
static sigjmp_buf g_jmp;
static volatile sig_atomic_t g_guard = 0;
static void onSegv(int sig) {
  if (g_guard) siglongjmp(g_jmp, 1);
  signal(sig, SIG_DFL); raise(sig);
}

struct LLVM {
  std::unique_ptr<MCRegisterInfo> MRI; std::unique_ptr<MCAsmInfo> MAI; std::unique_ptr<MCInstrInfo> MII;
  std::unique_ptr<MCSubtargetInfo> STI; std::unique_ptr<MCContext> Ctx; std::unique_ptr<MCDisassembler> Dis;
  std::unique_ptr<MCInstPrinter> IP;
  LLVM(const std::string &cpu, const std::string &feat) {
    LLVMInitializeAMDGPUTargetInfo(); LLVMInitializeAMDGPUTargetMC(); LLVMInitializeAMDGPUDisassembler();
    Triple TT("amdgcn-amd-amdhsa"); std::string err;
    const Target *T = TargetRegistry::lookupTarget(TT, err);
    if (!T) { fprintf(stderr, "%s\n", err.c_str()); exit(2); }
    MRI.reset(T->createMCRegInfo(TT)); MCTargetOptions MO;
    MAI.reset(T->createMCAsmInfo(*MRI, TT, MO)); MII.reset(T->createMCInstrInfo());
    STI.reset(T->createMCSubtargetInfo(TT, cpu, feat));
    Ctx.reset(new MCContext(TT, MAI.get(), MRI.get(), STI.get()));
    Dis.reset(T->createMCDisassembler(*STI, *Ctx));
    IP.reset(T->createMCInstPrinter(TT, 0, *MAI, *MII, *MRI));
  }
  // Returns size in bytes, 0 on failure.
  int decode(const uint32_t *w, int nw, MCInst &MI) {
    uint64_t sz = 0; std::vector<uint8_t> b(nw * 4);
    for (int i = 0; i < nw; i++) for (int k = 0; k < 4; k++) b[i * 4 + k] = (w[i] >> (8 * k)) & 0xff;
    std::string s; raw_string_ostream cs(s);
    if (sigsetjmp(g_jmp, 1)) { g_guard = 0; MI.clear(); return 0; }
    g_guard = 1;
    auto st = Dis->getInstruction(MI, sz, b, 0, cs);
    if (st == MCDisassembler::Success) { std::string t; raw_string_ostream os(t); IP->printInst(&MI, 0, "", *STI, os); }
    g_guard = 0;
    if (st != MCDisassembler::Success) return 0;
    return int(sz);
  }
  std::string text(const MCInst &MI) {
    std::string s; raw_string_ostream os(s); IP->printInst(&MI, 0, "", *STI, os); os.flush();
    size_t i = s.find_first_not_of(" \t"); return i == std::string::npos ? "" : s.substr(i);
  }
};

// Parses an LLVM register name ("VGPR4_VGPR5", "SGPR10", "AGPR3", "VGPR5_LO16", "TTMP4_TTMP5")
// into register file, first index and width in dwords; 16-bit halves set `half`.
static bool parseReg(const std::string &r, char &kind, int &lo, int &width, bool &half) {
  width = 0; half = false; lo = -1; kind = 0;
  std::stringstream ss(r); std::string part;
  while (std::getline(ss, part, '_')) {
    if (part == "LO16" || part == "HI16") { half = true; continue; }
    size_t i = 0; while (i < part.size() && isalpha((unsigned char)part[i])) i++;
    std::string p = part.substr(0, i);
    if (i == part.size()) return false;
    char k = p == "VGPR" ? 'v' : p == "AGPR" ? 'a' : p == "SGPR" ? 's' : p == "TTMP" ? 't' : 0;
    if (!k) return false;
    if (lo < 0) { lo = std::stoi(part.substr(i)); kind = k; }
    width++;
  }
  return lo >= 0;
}

static std::string join(const std::vector<std::string> &v, const char *sep) {
  std::string s; for (size_t i = 0; i < v.size(); i++) { if (i) s += sep; s += v[i]; } return s;
}

static int owner(const std::vector<Format> &fs, uint32_t w0) {
  int best = -1, bestBits = -1;
  for (size_t i = 0; i < fs.size(); i++) if ((w0 & fs[i].mask) == fs[i].value) {
    int pc = __builtin_popcount(fs[i].mask); if (pc > bestBits) { best = int(i); bestBits = pc; } }
  return best;
}

// For kinds that name registers, the (register kind, index) a field value selects; used to match
// MC operands back to encoding fields.
static bool fieldReg(const Field &f, long v, char &kind, int &idx) {
  const std::string &k = f.kind;
  if (k == "s" || k == "s7") { if (v < 106) { kind = 's'; idx = int(v); return true; }
    if (v >= 108 && v <= 123) { kind = 't'; idx = int(v - 108); return true; } return false; }
  if (k == "v9") { if (v >= 256) { kind = 'v'; idx = int(v - 256); return true; }
    if (v < 106) { kind = 's'; idx = int(v); return true; } return false; }
  if (k == "v") { kind = 'v'; idx = int(v); return true; }
  if (k == "sx2") { kind = 's'; idx = int(v * 2); return true; }
  if (k == "sx4") { kind = 's'; idx = int(v * 4); return true; }
  return false;
}


// VOP3/VOP3P modifier facts, found by probing: each modifier bit of the encoding (dword0 bits
// 8..15, dword1 bits 27..31) is flipped alone on a neutral word and the printed text compared.
// Output: `;`-separated entries, trailing modifiers in the order LLVM prints them:
//   abs=<m>  neg=<m>     src i (bit i of m) prints |x| for dword0 bit 8+i / -x for dword1 bit 29+i
//   <list>=<n>:<slots>[:<default>]  list modifier op_sel/op_sel_hi/neg_lo/neg_hi printed with n
//            slots; <slots> gives per encoding bit the slot it sets ('-' = none): op_sel dword0
//            bits 11..14, op_sel_hi dword1 27, 28, dword0 14, neg_lo dword1 29..31, neg_hi dword0
//            8..10; default = value of unset op_sel_hi slots
//   lit16=<m>  src i (bit i of m) prints a literal as its low 16 bits
//   fpc16=<m>  src i prints inline float constants as f16 bit patterns (16-bit integer operand)
//   fake16=<m> op_sel bit 11+j (bit j of m) makes LLVM decode another (fake16) opcode
//   (the trailing-modifier order is taken from a probe with every decodable modifier bit set)
//   clamp    dword0 bit 15 prints " clamp";  omod  dword1 bits 27..28 print mul:2/mul:4/div:2
//   acc_cd=<m>  MFMA: dword0 bit 15 makes AGPRs of src i (bit i of m) and vdst (bit 3);  acc=<m>  dword1 bit 27+i makes src i
//            an AGPR;  cbsz abid blgp  MFMA dword0 10..8, dword0 14..11, dword1 31..29 printed
//   bitop3   the 8-bit bitop3 operand (dword1 29..31, dword0 8..10, dword1 27..28) is printed
struct ModText { std::vector<std::string> ops; std::map<std::string, std::vector<int>> lists;
  std::vector<std::string> order; };
static ModText parseMods(std::string t) {
  for (size_t a; (a = t.find("/*")) != std::string::npos;) {
    size_t e = t.find("*/", a); t.erase(a, e == std::string::npos ? std::string::npos : e + 2 - a); }
  ModText r; auto sp = t.find_first_of(" \t"); if (sp == std::string::npos) return r;
  std::vector<std::string> toks; { std::stringstream ss(t.substr(sp + 1)); std::string x;
    while (ss >> x) toks.push_back(x); }
  std::string ops;
  for (auto &x : toks) {
    auto c = x.find(":[");
    if (c != std::string::npos && x.back() == ']') {
      std::string n = x.substr(0, c); std::vector<int> v;
      for (auto &e : split(x.substr(c + 2, x.size() - c - 3), ',')) v.push_back(std::stoi(e));
      r.lists[n] = v; r.order.push_back(n); continue; }
    if (x == "clamp") { r.order.push_back("clamp"); continue; }
    if (x.rfind("mul:", 0) == 0 || x.rfind("div:", 0) == 0) { r.order.push_back("omod"); continue; }
    if (x.rfind("bitop3:", 0) == 0) { r.order.push_back("bitop3"); continue; }
    if (x.rfind("cbsz:", 0) == 0 || x.rfind("abid:", 0) == 0 || x.rfind("blgp:", 0) == 0) { r.order.push_back(x.substr(0, 4)); continue; }
    if (!r.order.empty()) continue;
    if (!ops.empty()) ops += " ";
    ops += x;
  }
  for (auto &o : split(ops, ',')) { size_t i = o.find_first_not_of(' '); r.ops.push_back(i == std::string::npos ? "" : o.substr(i)); }
  return r;
}
static std::string modFacts(LLVM &L, const Format &f, const uint32_t *w0, const std::string &tpl) {
  bool p = f.name == "VOP3P";
  if (!p && f.name != "VOP3") return "";
  uint32_t b[8]; std::copy(w0, w0 + 8, b); b[0] &= ~0xff00u; b[1] &= ~0xf8000000u;
  int defHi = 0;
  MCInst MI;
  if (p) { uint32_t b1[8]; std::copy(b, b + 8, b1); b1[0] |= 1u << 14; b1[1] |= 3u << 27;
    if (L.decode(b1, 8, MI) && L.text(MI).find("op_sel_hi:") == std::string::npos) { std::copy(b1, b1 + 8, b); defHi = 1; } }
  if (!L.decode(b, 8, MI)) return "";
  ModText base = parseMods(L.text(MI));
  // Template operand index -> src number (from the {srcN} placeholders).
  ModText tp = parseMods(tpl);
  auto srcOf = [&](size_t i) { if (i >= tp.ops.size()) return -1;
    for (int k = 0; k < 3; k++) if (tp.ops[i] == "{src" + std::to_string(k) + "}") return k; return -1; };
  // Encoding bits: (dword, bit).
  const int bits[13][2] = {{0,8},{0,9},{0,10},{0,11},{0,12},{0,13},{0,14},{0,15},{1,27},{1,28},{1,29},{1,30},{1,31}};
  unsigned absM = 0, negM = 0, lit16 = 0, accM = 0; bool clamp = false, omod = false, bitop3 = false; unsigned accCd = 0;
  std::set<std::string> mai;
  std::map<std::string, std::pair<int, std::string>> lists; // name -> (n, slots)
  auto listBits = [&](const std::string &n, int dw, int bit) -> int {
    const int op_sel[4][2] = {{0,11},{0,12},{0,13},{0,14}}, hi[3][2] = {{1,27},{1,28},{0,14}},
      nl[3][2] = {{1,29},{1,30},{1,31}}, nh[3][2] = {{0,8},{0,9},{0,10}};
    const int (*t)[2] = n == "op_sel" ? op_sel : n == "op_sel_hi" ? hi : n == "neg_lo" ? nl : nh;
    int cnt = n == "op_sel" ? 4 : 3;
    for (int i = 0; i < cnt; i++) if (t[i][0] == dw && t[i][1] == bit) return i;
    return -1; };
  uint32_t okBits[2] = {0, 0}; unsigned fake16 = 0;
  for (auto &bb : bits) {
    uint32_t q[8]; std::copy(b, b + 8, q); q[bb[0]] ^= 1u << bb[1];
    MCInst M2; if (!L.decode(q, 8, M2)) continue;
    okBits[bb[0]] |= 1u << bb[1];
    if (!p && bb[0] == 0 && bb[1] >= 11 && bb[1] <= 14 && M2.getOpcode() != MI.getOpcode()) fake16 |= 1u << (bb[1] - 11);
    ModText pr = parseMods(L.text(M2));
    if (pr.ops.size() == base.ops.size()) for (size_t i = 0; i < pr.ops.size(); i++) {
      int s = srcOf(i); if (s < 0 || pr.ops[i] == base.ops[i]) continue;
      if (pr.ops[i] == "|" + base.ops[i] + "|" && bb[0] == 0 && bb[1] == 8 + s) absM |= 1u << s;
      if ((pr.ops[i] == "-" + base.ops[i] || pr.ops[i] == "neg(" + base.ops[i] + ")") && bb[0] == 1 && bb[1] == 29 + s) negM |= 1u << s;
    }
    // MFMA acc bits: a VGPR operand turns into an AGPR (or back).
    auto vToA = [](const std::string &x, const std::string &y) {
      return x.size() == y.size() && !x.empty() && x.substr(1) == y.substr(1) &&
             ((x[0] == 'v' && y[0] == 'a') || (x[0] == 'a' && y[0] == 'v')); };
    if (pr.ops.size() == base.ops.size()) for (size_t i = 0; i < pr.ops.size(); i++) {
      if (!vToA(base.ops[i], pr.ops[i])) continue;
      int s = srcOf(i);
      if (p && bb[0] == 0 && bb[1] == 15) accCd |= (i < tp.ops.size() && tp.ops[i] == "{vdst}") ? 8u : s >= 0 ? 1u << s : 0u;
      if (p && bb[0] == 1 && (bb[1] == 27 || bb[1] == 28) && s == bb[1] - 27) accM |= 1u << s;
    }
    for (auto &o : pr.order) {
      if (o == "cbsz" || o == "abid" || o == "blgp") mai.insert(o);
      if (o == "bitop3") bitop3 = true;
      if (o == "clamp" && bb[0] == 0 && bb[1] == 15) clamp = true;
      if (o == "omod" && bb[0] == 1 && bb[1] == 27) omod = true;
    }
    for (auto &l : pr.lists) {
      int def = l.first == "op_sel_hi" ? defHi : 0;
      std::vector<int> bv = base.lists.count(l.first) ? base.lists[l.first] : std::vector<int>(l.second.size(), def);
      if (bv.size() != l.second.size()) continue;
      int slot = -1; for (size_t i = 0; i < bv.size(); i++) if (bv[i] != l.second[i]) slot = int(i);
      int eb = listBits(l.first, bb[0], bb[1]);
      if (slot < 0 || eb < 0) continue;
      auto &e = lists[l.first]; e.first = int(l.second.size());
      if (e.second.empty()) e.second = std::string(l.first == "op_sel" ? 4 : 3, '-');
      e.second[eb] = char('0' + slot);
    }
  }
  // 16-bit integer operands: the inline constant -2.0 (245) prints as its f16 bits 0xc000.
  unsigned fpc16 = 0;
  for (int k = 0; k < 3; k++) for (auto &fd : f.fields) if (fd.name == "src" + std::to_string(k)) {
    uint32_t q[8]; std::copy(b, b + 8, q); setBits(q, fd.b, 245);
    MCInst M2; if (L.decode(q, 8, M2) && L.text(M2).find("0xc000") != std::string::npos) fpc16 |= 1u << k;
  }
  // 16-bit literals: src i = 255 with literal 0x7be40ae4 prints only the low half (0xae4).
  for (int k = 0; k < 3; k++) for (auto &fd : f.fields) if (fd.name == "src" + std::to_string(k)) {
    uint32_t q[8]; std::copy(b, b + 8, q); setBits(q, fd.b, 255); q[f.dwords] = 0x7be40ae4u;
    MCInst M2; if (!L.decode(q, 8, M2)) continue;
    std::string t = L.text(M2);
    if (t.find("0xae4") != std::string::npos && t.find("0x7be40ae4") == std::string::npos) lit16 |= 1u << k;
  }
  // Print order: every modifier set at once, else LLVM's usual order.
  std::vector<std::string> order;
  { uint32_t q[8]; std::copy(b, b + 8, q); q[0] ^= okBits[0] & ~(fake16 << 11); q[1] ^= okBits[1];
    MCInst M2; if (L.decode(q, 8, M2)) order = parseMods(L.text(M2)).order; }
  for (auto n : {"op_sel", "op_sel_hi", "neg_lo", "neg_hi", "bitop3", "clamp", "omod", "cbsz", "abid", "blgp"})
    if (std::find(order.begin(), order.end(), n) == order.end()) order.push_back(n);
  std::vector<std::string> out;
  if (absM) out.push_back("abs=" + std::to_string(absM));
  if (negM) out.push_back("neg=" + std::to_string(negM));
  if (lit16) out.push_back("lit16=" + std::to_string(lit16));
  if (fpc16) out.push_back("fpc16=" + std::to_string(fpc16));
  if (fake16) out.push_back("fake16=" + std::to_string(fake16));
  if (accCd) out.push_back("acc_cd=" + std::to_string(accCd));
  if (accM) out.push_back("acc=" + std::to_string(accM));
  for (auto &n : order) {
    if (n == "clamp" && clamp) out.push_back("clamp");
    else if (n == "omod" && omod) out.push_back("omod");
    else if (n == "bitop3" && bitop3) out.push_back("bitop3");
    else if (mai.count(n)) out.push_back(n);
    else if (lists.count(n)) { auto &e = lists[n];
      out.push_back(n + "=" + std::to_string(e.first) + ":" + e.second + (n == "op_sel_hi" ? ":" + std::to_string(defHi) : "")); }
  }
  return join(out, ";");
}

int main(int argc, char **argv) {
  if (argc < 3) { fprintf(stderr, "usage: isa-dump ops|sregs|words ...\n"); return 2; }
  std::string mode = argv[1], cpu = argv[2];
  std::string feat = getenv("ISA_DUMP_FEATURES") ? getenv("ISA_DUMP_FEATURES") : "";
  LLVM L(cpu, feat);
  signal(SIGSEGV, onSegv); signal(SIGBUS, onSegv);
  if (mode == "words") {
    std::vector<uint32_t> w; for (int i = 3; i < argc; i++) w.push_back(std::stoul(argv[i], nullptr, 16));
    w.resize(w.size() + 4, 0); MCInst MI; int sz = L.decode(w.data(), int(w.size()), MI);
    if (!sz) { printf("FAIL\n"); return 1; }
    printf("%d\t%s\t%s\n", sz, L.MII->getName(MI.getOpcode()).str().c_str(), L.text(MI).c_str());
    for (unsigned i = 0; i < MI.getNumOperands(); i++) { auto &o = MI.getOperand(i);
      if (o.isReg()) printf("  op%u reg %s\n", i, L.MRI->getName(o.getReg())); else if (o.isImm()) printf("  op%u imm %lld\n", i, (long long)o.getImm()); }
    return 0;
  }
  std::string family = argv[3];
  auto all = loadFormats(argv[4]); std::vector<Format> fs;
  for (auto &f : all) if (f.family == family) fs.push_back(f);
  if (mode == "sregs") {
    // Decode "s_mov_b32 s0, <value>" (SOP1) for every 8-bit source value.
    for (auto &f : fs) if (f.name == "SOP1") {
      for (uint64_t op = 0; op < (1u << f.opBits()); op++) {
        uint32_t w[6] = {f.value, 0, 0, 0, 0, 0};
        uint64_t rem = op; for (int i = int(f.op.size()) - 1; i >= 0; i--) { int n = f.op[i].hi - f.op[i].lo + 1; setBits(w, f.op[i], rem & ((1u << n) - 1)); rem >>= n; }
        MCInst MI; if (!L.decode(w, 6, MI) || L.text(MI).rfind("s_mov_b32 ", 0) != 0) continue;
        for (int v = 0; v < 256; v++) { w[0] = (w[0] & ~0xffu) | v; MCInst M2; int sz = L.decode(w, 6, M2);
          std::string t = sz ? L.text(M2) : "<invalid>"; auto c = t.find(", ");
          printf("%d\t%s\n", v, c == std::string::npos ? t.c_str() : t.substr(c + 2).c_str()); }
        return 0;
      }
    }
    return 1;
  }
  if (mode == "pairs") {
    // Two-part encodings LLVM decodes as ONE instruction (gfx950/gfx1250 VOP3PX2: a
    // v_mfma_ld_scale_b32 / v_wmma_ld_scale*_paired prefix + the MFMA/WMMA dwords): every pair
    // of VOP3P opcodes with the neutral template in both halves; a 16-byte decode is a row.
    // mask/value per dword: the bits whose flip changes the decode to another length or
    // mnemonic, or makes LLVM reject the words (a narrower match than LLVM's at worst: those
    // words then decode as two instructions or not at all).
    printf("#prefix_key\tkey\tmask0\tmask1\tmask2\tmask3\tvalue0\tvalue1\tvalue2\tvalue3\tmc_name\tmnemonic\n");
    for (auto &f : fs) {
      if (f.name != "VOP3P") continue;
      uint32_t half[2] = {f.value, 0};
      for (auto &fd : f.fields) setBits(half, fd.b, fd.tpl);
      int nb = f.opBits();
      auto withKey = [&](uint32_t *w, uint64_t key) {
        for (int i = int(f.op.size()) - 1; i >= 0; i--) { int n = f.op[i].hi - f.op[i].lo + 1;
          setBits(w, f.op[i], key & ((1ull << n) - 1)); key >>= n; } };
      // Templates: the neutral one and the format's alternatives, applied to both halves.
      std::vector<std::array<uint32_t, 2>> tpls;
      for (size_t a = 0; a <= f.alts.size(); a++) {
        uint32_t h[2] = {half[0], half[1]};
        if (a) for (auto &as : f.alts[a - 1]) for (auto &fd : f.fields) if (fd.name == as.first) setBits(h, fd.b, as.second);
        tpls.push_back({h[0], h[1]});
        // The same with vdst = 0 (the prefixes have no destination and LLVM rejects one).
        for (auto &fd : f.fields) if (fd.name == "vdst") setBits(h, fd.b, 0);
        tpls.push_back({h[0], h[1]});
      }
      // Prefix candidates: VOP3P opcodes that decode alone (8 bytes) and define no register
      // (the scale loads only read their two sources).
      std::vector<std::pair<uint64_t, size_t>> prefixes; // opcode key, template that decodes
      for (uint64_t p = 0; p < (1ull << nb); p++) for (size_t a = 0; a < tpls.size(); a++) {
        uint32_t w[8] = {tpls[a][0], tpls[a][1], 0, 0, 0, 0, 0, 0}; withKey(w, p);
        MCInst MI; if (L.decode(w, 8, MI) != 8) continue;
        if (L.MII->get(MI.getOpcode()).getNumDefs() == 0) prefixes.push_back({p, a});
        break; // the first template that decodes decides
      }
      for (auto [p, a] : prefixes) for (uint64_t q = 0; q < (1ull << nb); q++) {
        // The second half's op_sel bits (dword 0 bits 14:11) are fixed by some pairs
        // (gfx950 MFMA: 0b0001): each value is tried, with each template.
        uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        MCInst MI; bool found = false;
        for (size_t b = 0; b < tpls.size() && !found; b++)
          for (uint32_t os = 0; os < 16 && !found; os++) {
            w[0] = tpls[a][0]; w[1] = tpls[a][1]; w[2] = tpls[b][0]; w[3] = tpls[b][1];
            withKey(w, p); withKey(w + 2, q);
            w[2] = (w[2] & ~(15u << 11)) | (os << 11);
            found = L.decode(w, 8, MI) == 16;
          }
        if (!found) continue;
        std::string t = L.text(MI), mn = t.substr(0, t.find_first_of(" \t"));
        uint32_t mask[4] = {0, 0, 0, 0};
        for (int dw = 0; dw < 4; dw++) for (int b = 0; b < 32; b++) {
          uint32_t w2[8]; std::copy(w, w + 8, w2); w2[dw] ^= 1u << b;
          MCInst M2; int s2 = L.decode(w2, 8, M2);
          std::string t2 = s2 ? L.text(M2) : "";
          if (s2 != 16 || t2.substr(0, t2.find_first_of(" \t")) != mn) mask[dw] |= 1u << b;
        }
        printf("%llu\t%llu\t%08x\t%08x\t%08x\t%08x\t%08x\t%08x\t%08x\t%08x\t%s\t%s\n",
               (unsigned long long)p, (unsigned long long)q, mask[0], mask[1], mask[2], mask[3],
               w[0] & mask[0], w[1] & mask[1], w[2] & mask[2], w[3] & mask[3],
               L.MII->getName(MI.getOpcode()).str().c_str(), mn.c_str());
      }
    }
    return 0;
  }
  // ops
  printf("#format\tkey\tsize\tprobes\tmc_name\tmnemonic\tmcid\ttsflags\timp_uses\timp_defs\toperands\tmnemonic_y\tasm\tmods\n");
  for (auto &f : fs) {
    int nb = f.opBits();
    for (uint64_t key = 0; key < (1ull << nb); key++) {
      uint32_t base[8] = {f.value, 0, 0, 0, 0, 0, 0, 0};
      for (auto &fd : f.fields) setBits(base, fd.b, fd.tpl);
      uint64_t rem = key;
      for (int i = int(f.op.size()) - 1; i >= 0; i--) { int n = f.op[i].hi - f.op[i].lo + 1; setBits(base, f.op[i], rem & ((1ull << n) - 1)); rem >>= n; }
      if (&fs[owner(fs, base[0])] != &f) continue;
      // Templates: the base one, then each alternative (field overrides) in order.
      std::vector<std::vector<std::pair<std::string,long>>> tpls = {{}};
      for (auto &a : f.alts) tpls.push_back(a);
      // Then every subset of register fields set to zero (LLVM rejects some unused non-zero fields).
      std::vector<std::string> regf;
      for (auto &fd : f.fields) if (fd.kind != "imm") regf.push_back(fd.name);
      std::vector<std::vector<std::pair<std::string,long>>> zs;
      for (unsigned m = 1; m < (1u << regf.size()) && regf.size() <= 8; m++) {
        std::vector<std::pair<std::string,long>> z;
        for (size_t i = 0; i < regf.size(); i++) if (m & (1u << i)) z.push_back({regf[i], 0});
        zs.push_back(z);
      }
      tpls.insert(tpls.end(), zs.begin(), zs.end());
      for (auto &a : f.lateAlts) {
        tpls.push_back(a);
        for (auto z : zs) { z.insert(z.end(), a.begin(), a.end()); tpls.push_back(z); }
      }
      for (auto &tp : tpls) {
        uint32_t w[8]; std::copy(base, base + 8, w);
        std::map<std::string,long> vals; for (auto &fd : f.fields) vals[fd.name] = fd.tpl;
        for (auto &as : tp) for (auto &fd : f.fields) if (fd.name == as.first) { setBits(w, fd.b, as.second); vals[fd.name] = as.second; }
        if (getenv("ISA_DUMP_TRACE")) { fprintf(stderr, "%s %08x %08x %08x\n", f.name.c_str(), w[0], w[1], w[2]); fflush(stderr); }
        MCInst MI; int sz = L.decode(w, 8, MI);
        if (!sz) continue;
        // Probes.
        std::vector<std::string> pr;
        for (size_t p = 0; p < f.probes.size(); p++) {
          uint32_t w2[8]; std::copy(w, w + 8, w2);
          for (auto &as : f.probes[p]) for (auto &fd : f.fields) if (fd.name == as.first) setBits(w2, fd.b, as.second);
          MCInst M2; int s2 = L.decode(w2, 8, M2);
          pr.push_back(f.probeNames[p] + ":" + (s2 ? std::to_string(s2) : std::string("x")));
        }
        const MCInstrDesc &D = L.MII->get(MI.getOpcode());
        std::vector<std::string> fl;
        if (D.isBranch()) fl.push_back("branch"); if (D.isConditionalBranch()) fl.push_back("cond");
        if (D.isIndirectBranch()) fl.push_back("indirect"); if (D.isCall()) fl.push_back("call");
        if (D.isReturn()) fl.push_back("return"); if (D.isTerminator()) fl.push_back("terminator");
        if (D.isBarrier()) fl.push_back("barrier"); if (D.mayLoad()) fl.push_back("load");
        if (D.mayStore()) fl.push_back("store"); if (D.hasUnmodeledSideEffects()) fl.push_back("side");
        std::vector<std::string> iu, id;
        for (MCPhysReg r : D.implicit_uses()) iu.push_back(L.MRI->getName(r));
        for (MCPhysReg r : D.implicit_defs()) id.push_back(L.MRI->getName(r));
        // Match register operands to fields.
        std::vector<std::string> ops;
        std::set<std::string> used;
        std::vector<std::pair<std::string, std::string>> subst; // register text -> field
        std::map<unsigned, std::string> opEntry; // MC operand index -> matched "field:d:..." entry
        for (unsigned i = 0; i < MI.getNumOperands(); i++) {
          auto &o = MI.getOperand(i); if (!o.isReg() || !o.getReg()) continue;
          std::string rn = L.MRI->getName(o.getReg()); char k; int lo, wd; bool half;
          if (!parseReg(rn, k, lo, wd, half)) continue;
          bool def = i < D.getNumDefs();
          // A use tied to a def (v_fmac/v_mac accumulator, VOPD fmac src2) reads the def's
          // register: recorded below from the def's field, never matched on its own (LLVM's
          // VOPD decoder leaves the Y accumulator at VGPR0).
          if (!def && i < D.getNumOperands() && D.getOperandConstraint(i, MCOI::TIED_TO) >= 0) continue;
          for (auto &fd : f.fields) { char fk; int fi;
            if (used.count(fd.name) || !fieldReg(fd, vals[fd.name], fk, fi)) continue;
            // A VGPR field may also name an AGPR (acc) or, in VOP3 vdst, an SGPR (v_readlane,
            // v_cmp_*_e64): record the register file that LLVM decoded.
            bool kindOk = fk == k || (fd.kind == "v" && (k == 'a' || k == 's' || k == 't')) || (fd.kind == "v9" && fk == 'v' && k == 'a');
            if (!kindOk || fi != lo) continue;
            used.insert(fd.name);
            {
              std::string pre = k == 't' ? "ttmp" : std::string(1, k), rt;
              if (wd <= 1) rt = pre + std::to_string(lo); else rt = pre + "[" + std::to_string(lo) + ":" + std::to_string(lo + wd - 1) + "]";
              // true16 halves print as v8.l / v8.h: the suffix belongs to the operand.
              if (half) { std::string hn = L.MRI->getName(o.getReg()); rt += hn.find("HI16") != std::string::npos ? ".h" : ".l"; }
              subst.push_back({rt, fd.name});
            }
            ops.push_back(fd.name + ":" + (def ? "d" : "u") + ":" + (half ? "h" : std::to_string(wd)) + ":" + std::string(1, k));
            opEntry[i] = ops.back();
            break; }
        }
        for (unsigned i = D.getNumDefs(); i < MI.getNumOperands() && i < D.getNumOperands(); i++) {
          int t = D.getOperandConstraint(i, MCOI::TIED_TO);
          auto e = t >= 0 ? opEntry.find(unsigned(t)) : opEntry.end();
          if (e == opEntry.end()) continue;
          std::string u = e->second; size_t c = u.find(":d:");
          if (c != std::string::npos) { u[c + 1] = 'u'; ops.push_back(u); }
        }
        std::string t = L.text(MI); auto sp = t.find_first_of(" \t");
        // Operand text template: register texts of matched fields become {field}.
        std::string tpl = t;
        for (auto &su : subst) {
          size_t from = tpl.find_first_of(" \t");
          while (from != std::string::npos) {
            size_t at = tpl.find(su.first, from);
            if (at == std::string::npos) break;
            size_t end = at + su.first.size();
            auto word = [](char c) { return isalnum((unsigned char)c) || c == '_' || c == '[' || c == ':'; };
            bool lb = at == 0 || !word(tpl[at - 1]);
            bool rb = end >= tpl.size() || !(isalnum((unsigned char)tpl[end]) || tpl[end] == '_' || tpl[end] == ':' || tpl[end] == '[' || tpl[end] == '.');
            if (lb && rb) { tpl = tpl.substr(0, at) + "{" + su.second + "}" + tpl.substr(end); break; }
            from = at + 1;
          }
        }
        for (auto &c : tpl) if (c == '\t') c = ' ';
        for (size_t a; (a = tpl.find("/*")) != std::string::npos;) {
          size_t b = tpl.find("*/", a); tpl.erase(a, b == std::string::npos ? std::string::npos : b + 2 - a);
        }
        // VOPD: the second (Y) mnemonic follows "::".
        std::string my; auto dc = t.find(":: ");
        if (dc != std::string::npos) { my = t.substr(dc + 3); my = my.substr(0, my.find_first_of(" \t")); }
        // Column 14 (VOP3/VOP3P only; omitted when empty): modifier facts.
        std::string mods = modFacts(L, f, w, tpl);
        printf("%s\t%llu\t%d\t%s\t%s\t%s\t%s\t%llx\t%s\t%s\t%s\t%s\t%s%s%s\n", f.name.c_str(), (unsigned long long)key, sz,
               join(pr, ",").c_str(), L.MII->getName(MI.getOpcode()).str().c_str(),
               sp == std::string::npos ? t.c_str() : t.substr(0, sp).c_str(), join(fl, ",").c_str(),
               (unsigned long long)D.TSFlags, join(iu, ",").c_str(), join(id, ",").c_str(), join(ops, ",").c_str(), my.c_str(), tpl.c_str(), mods.empty() ? "" : "\t", mods.c_str());
        break;
      }
    }
  }
  return 0;
}
