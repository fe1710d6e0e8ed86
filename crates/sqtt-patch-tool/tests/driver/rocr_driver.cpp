// Plays ROCr's and CLR's side of the HSA tools interface for the tests of sqtt-patch-tool
// (no GPU needed). It builds the API tables from AMD's own header (hsa/hsa_api_trace.h), fills
// the code-object entries with recorders, dlopens the tool, calls its OnLoad, then loads code
// objects through the tables as the runtime's users do, and prints what the recorders got.
//
// usage: rocr_driver TOOL|- OUTDIR [--pre-tool] [--bad-version] [--no-tool] [--refuse-memory]
//                    [--threads N] LOAD...
//   LOAD: mem:PATH | file:PATH | slice:PATH | ext:PATH (slice, table from the deprecated
//         hsa_system_get_extension_table) | deser:PATH
// TOOL "-" loads the libraries of HSA_TOOLS_LIB in order, as ROCr does. Built with
// -DDRIVER_SHARED -shared, the same code is `int driver_main(int argc, char** argv)`.
// For each load it writes the bytes the runtime's entry received to OUTDIR/t<T>-<I>.co and
// prints: LOAD t<T>-<I> kind=<memory|file|slice|deser> status=<hex> destroy=<hex> valid=<0|1>
// offset_kept=<0|1> us=<microseconds in the create call, tool included>
// Layout expectations of the tool come in as -DEXPECT_* and are checked at compile time.
#include <hsa/hsa_api_trace.h>
#include <hsa/hsa_ven_amd_loader.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#ifdef EXPECT_ROOT_CORE  // always given by the tests (support/mod.rs); tools/bench_exec.sh omits them
static_assert(sizeof(ApiTableVersion) == 16, "ApiTableVersion");
static_assert(offsetof(HsaApiTable, core_) == EXPECT_ROOT_CORE, "HsaApiTable::core_");
static_assert(offsetof(CoreApiTable, hsa_system_get_extension_table_fn) == EXPECT_CORE_GET_EXTENSION_TABLE, "get_extension_table");
static_assert(offsetof(CoreApiTable, hsa_code_object_deserialize_fn) == EXPECT_CORE_DESERIALIZE, "deserialize");
static_assert(offsetof(CoreApiTable, hsa_code_object_destroy_fn) == EXPECT_CORE_CODE_OBJECT_DESTROY, "code_object_destroy");
static_assert(offsetof(CoreApiTable, hsa_system_get_major_extension_table_fn) == EXPECT_CORE_GET_MAJOR_EXTENSION_TABLE, "get_major_extension_table");
static_assert(offsetof(CoreApiTable, hsa_code_object_reader_create_from_file_fn) == EXPECT_CORE_READER_FROM_FILE, "reader_create_from_file");
static_assert(offsetof(CoreApiTable, hsa_code_object_reader_create_from_memory_fn) == EXPECT_CORE_READER_FROM_MEMORY, "reader_create_from_memory");
static_assert(offsetof(CoreApiTable, hsa_code_object_reader_destroy_fn) == EXPECT_CORE_READER_DESTROY, "reader_destroy");
static_assert(sizeof(CoreApiTable) >= EXPECT_CORE_MIN_SIZE, "CoreApiTable size");
static_assert(offsetof(hsa_ven_amd_loader_1_02_pfn_t, hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size) == EXPECT_LOADER_FROM_FILE_SLICE, "loader 1.02 offset-size");
static_assert(offsetof(hsa_ven_amd_loader_1_03_pfn_t, hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size) == EXPECT_LOADER_FROM_FILE_SLICE, "loader 1.03 offset-size");
#endif

namespace {

struct Entry {
  std::string kind;
  const void* ptr = nullptr;  // memory kinds: what the runtime must be able to read until destroy
  std::vector<unsigned char> copy;
  bool destroyed = false;
  bool valid_at_destroy = false;
};

std::mutex mu;
std::map<uint64_t, Entry> entries;
uint64_t next_handle = 1;
bool refuse_memory = false;

uint64_t record(const char* kind, const void* ptr, std::vector<unsigned char> bytes) {
  std::lock_guard<std::mutex> g(mu);
  uint64_t h = next_handle++;
  Entry e;
  e.kind = kind;
  e.ptr = ptr;
  e.copy = std::move(bytes);
  entries[h] = std::move(e);
  return h;
}

std::vector<unsigned char> read_fd(int fd, off_t off, size_t size) {
  std::vector<unsigned char> b(size);
  size_t done = 0;
  while (done < size) {
    ssize_t n = pread(fd, b.data() + done, size - done, off + done);
    if (n <= 0) break;
    done += n;
  }
  b.resize(done);
  return b;
}

hsa_status_t rec_from_memory(const void* p, size_t n, hsa_code_object_reader_t* r) {
  if (refuse_memory) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT;
  const unsigned char* c = static_cast<const unsigned char*>(p);
  r->handle = record("memory", p, std::vector<unsigned char>(c, c + n));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t rec_from_file(hsa_file_t fd, hsa_code_object_reader_t* r) {
  off_t end = lseek(fd, 0, SEEK_END);
  lseek(fd, 0, SEEK_SET);
  r->handle = record("file", nullptr, read_fd(fd, 0, end));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t rec_from_slice(hsa_file_t fd, size_t off, size_t n, hsa_code_object_reader_t* r) {
  r->handle = record("slice", nullptr, read_fd(fd, off, n));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t rec_deserialize(void* p, size_t n, const char*, hsa_code_object_t* co) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  co->handle = record("deser", p, std::vector<unsigned char>(c, c + n));
  return HSA_STATUS_SUCCESS;
}

hsa_status_t destroy_handle(uint64_t h) {
  std::lock_guard<std::mutex> g(mu);
  auto it = entries.find(h);
  if (it == entries.end() || it->second.destroyed) return HSA_STATUS_ERROR_INVALID_CODE_OBJECT_READER;
  Entry& e = it->second;
  e.valid_at_destroy = e.ptr == nullptr || memcmp(e.ptr, e.copy.data(), e.copy.size()) == 0;
  e.destroyed = true;
  return HSA_STATUS_SUCCESS;
}

hsa_status_t rec_reader_destroy(hsa_code_object_reader_t r) { return destroy_handle(r.handle); }
hsa_status_t rec_co_destroy(hsa_code_object_t c) { return destroy_handle(c.handle); }

hsa_ven_amd_loader_1_03_pfn_t loader_table() {
  hsa_ven_amd_loader_1_03_pfn_t t;
  memset(&t, 0, sizeof t);
  t.hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size = rec_from_slice;
  return t;
}

hsa_status_t rec_get_major(uint16_t ext, uint16_t major, size_t len, void* table) {
  if (ext != HSA_EXTENSION_AMD_LOADER || major != 1) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  hsa_ven_amd_loader_1_03_pfn_t t = loader_table();
  memcpy(table, &t, len < sizeof t ? len : sizeof t);
  return HSA_STATUS_SUCCESS;
}

hsa_status_t rec_get_ext(uint16_t ext, uint16_t major, uint16_t minor, void* table) {
  if (ext != HSA_EXTENSION_AMD_LOADER || major != 1) return HSA_STATUS_ERROR_INVALID_ARGUMENT;
  size_t len = minor >= 3 ? sizeof(hsa_ven_amd_loader_1_03_pfn_t)
             : minor == 2 ? sizeof(hsa_ven_amd_loader_1_02_pfn_t)
             : minor == 1 ? sizeof(hsa_ven_amd_loader_1_01_pfn_t)
                          : sizeof(hsa_ven_amd_loader_1_00_pfn_t);
  hsa_ven_amd_loader_1_03_pfn_t t = loader_table();
  memcpy(table, &t, len);
  return HSA_STATUS_SUCCESS;
}

// A tool installed before ours: counts and forwards.
decltype(hsa_code_object_reader_create_from_memory)* a_prev_memory;
decltype(hsa_code_object_reader_create_from_file)* a_prev_file;
std::atomic<int> a_memory{0}, a_file{0};
hsa_status_t a_from_memory(const void* p, size_t n, hsa_code_object_reader_t* r) {
  a_memory++;
  return a_prev_memory(p, n, r);
}
hsa_status_t a_from_file(hsa_file_t fd, hsa_code_object_reader_t* r) {
  a_file++;
  return a_prev_file(fd, r);
}

HsaApiTableContainer tables;

std::vector<unsigned char> read_file(const std::string& path) {
  FILE* f = fopen(path.c_str(), "rb");
  if (!f) { fprintf(stderr, "cannot read %s\n", path.c_str()); exit(2); }
  std::vector<unsigned char> b;
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) b.insert(b.end(), buf, buf + n);
  fclose(f);
  return b;
}

void write_file(const std::string& path, const std::vector<unsigned char>& b) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f || fwrite(b.data(), 1, b.size(), f) != b.size()) { fprintf(stderr, "cannot write %s\n", path.c_str()); exit(2); }
  fclose(f);
}

std::string outdir;
std::mutex print_mu;

void load_one(const std::string& name, const std::string& spec) {
  size_t colon = spec.find(':');
  std::string mode = spec.substr(0, colon), path = spec.substr(colon + 1);
  std::vector<unsigned char> obj = read_file(path);
  CoreApiTable* core = tables.root.core_;
  hsa_status_t st = HSA_STATUS_ERROR;
  uint64_t handle = 0;
  bool offset_kept = true;
  bool is_co = false;
  std::vector<unsigned char> mem;  // the application's buffer: valid until destroy, then freed
  auto t0 = std::chrono::steady_clock::now();
  if (mode == "mem" || mode == "deser") {
    mem = obj;
    if (mode == "mem") {
      hsa_code_object_reader_t r;
      st = core->hsa_code_object_reader_create_from_memory_fn(mem.data(), mem.size(), &r);
      handle = r.handle;
    } else {
      hsa_code_object_t c;
      st = core->hsa_code_object_deserialize_fn(mem.data(), mem.size(), "", &c);
      handle = c.handle;
      is_co = true;
    }
  } else {
    std::string file = outdir + "/" + name + ".input";
    size_t off = 0;
    if (mode == "file") {
      write_file(file, obj);
    } else {
      std::vector<unsigned char> big(4096, 'H');
      big.insert(big.end(), obj.begin(), obj.end());
      big.insert(big.end(), 100, 'T');
      write_file(file, big);
      off = 4096;
    }
    int fd = open(file.c_str(), O_RDONLY);
    if (fd < 0) { fprintf(stderr, "cannot open %s\n", file.c_str()); exit(2); }
    hsa_code_object_reader_t r;
    if (mode == "file") {
      st = core->hsa_code_object_reader_create_from_file_fn(fd, &r);
    } else {
      hsa_ven_amd_loader_1_03_pfn_t t;
      memset(&t, 0, sizeof t);
      hsa_status_t got = mode == "ext"
          ? core->hsa_system_get_extension_table_fn(HSA_EXTENSION_AMD_LOADER, 1, 3, &t)
          : core->hsa_system_get_major_extension_table_fn(HSA_EXTENSION_AMD_LOADER, 1, sizeof t, &t);
      if (got != HSA_STATUS_SUCCESS) { fprintf(stderr, "no loader table\n"); exit(2); }
      st = t.hsa_ven_amd_loader_code_object_reader_create_from_file_with_offset_size(fd, off, obj.size(), &r);
    }
    offset_kept = lseek(fd, 0, SEEK_CUR) == 0;
    handle = r.handle;
    close(fd);
  }
  long long us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - t0).count();
  // Whatever the tool freed early is likely reused by these allocations and overwritten.
  for (int i = 0; i < 8; i++) {
    std::vector<unsigned char> scribble(obj.size() + i * 64, 0xAB);
    volatile unsigned char sink = scribble[scribble.size() / 2];
    (void)sink;
  }
  Entry e;
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = entries.find(handle);
    if (it != entries.end()) e = it->second;
  }
  hsa_status_t ds = HSA_STATUS_SUCCESS;
  if (st == HSA_STATUS_SUCCESS) {
    if (is_co) {
      hsa_code_object_t c{handle};
      ds = core->hsa_code_object_destroy_fn(c);
    } else {
      hsa_code_object_reader_t r{handle};
      ds = core->hsa_code_object_reader_destroy_fn(r);
    }
  }
  bool valid = false;
  {
    std::lock_guard<std::mutex> g(mu);
    auto it = entries.find(handle);
    if (it != entries.end()) valid = it->second.valid_at_destroy;
  }
  write_file(outdir + "/" + name + ".co", e.copy);
  std::lock_guard<std::mutex> g(print_mu);
  printf("LOAD %s kind=%s status=%x destroy=%x valid=%d offset_kept=%d us=%lld\n", name.c_str(),
         e.kind.c_str(), st, ds, valid ? 1 : 0, offset_kept ? 1 : 0, us);
}

}  // namespace

#ifdef DRIVER_SHARED
// Built as a shared library for the Python (ctypes) application of the tests.
extern "C" __attribute__((visibility("default"))) int driver_main(int argc, char** argv) {
#else
int main(int argc, char** argv) {
#endif
  if (argc < 3) { fprintf(stderr, "usage: rocr_driver TOOL OUTDIR [flags] LOAD...\n"); return 2; }
  const char* tool = argv[1];
  outdir = argv[2];
  bool pre_tool = false, bad_version = false, no_tool = false;
  int threads = 1;
  std::vector<std::string> loads;
  for (int i = 3; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--pre-tool") pre_tool = true;
    else if (a == "--bad-version") bad_version = true;
    else if (a == "--no-tool") no_tool = true;
    else if (a == "--refuse-memory") refuse_memory = true;
    else if (a == "--threads" && i + 1 < argc) threads = atoi(argv[++i]);
    else loads.push_back(a);
  }
  CoreApiTable* core = tables.root.core_;
  core->hsa_code_object_reader_create_from_memory_fn = rec_from_memory;
  core->hsa_code_object_reader_create_from_file_fn = rec_from_file;
  core->hsa_code_object_reader_destroy_fn = rec_reader_destroy;
  core->hsa_code_object_deserialize_fn = rec_deserialize;
  core->hsa_code_object_destroy_fn = rec_co_destroy;
  core->hsa_system_get_major_extension_table_fn = rec_get_major;
  core->hsa_system_get_extension_table_fn = rec_get_ext;
  if (bad_version) tables.root.version.major_id = 99;
  if (pre_tool) {
    a_prev_memory = core->hsa_code_object_reader_create_from_memory_fn;
    a_prev_file = core->hsa_code_object_reader_create_from_file_fn;
    core->hsa_code_object_reader_create_from_memory_fn = a_from_memory;
    core->hsa_code_object_reader_create_from_file_fn = a_from_file;
  }
  // TOOL "-": the libraries named in HSA_TOOLS_LIB (space-separated), in order, as ROCr loads
  // them; one that cannot be opened is skipped and named to the next ones.
  std::vector<std::string> tool_names;
  if (std::string(tool) == "-") {
    const char* env = getenv("HSA_TOOLS_LIB");
    std::string list = env ? env : "", cur;
    for (char ch : list + " ") {
      if (ch == ' ') { if (!cur.empty()) tool_names.push_back(cur); cur.clear(); }
      else cur += ch;
    }
  } else {
    tool_names.push_back(tool);
  }
  std::vector<void (*)()> unloads;
  std::vector<std::string> failed;
  for (size_t k = 0; !no_tool && k < tool_names.size(); k++) {
    void* lib = dlopen(tool_names[k].c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      printf("ONLOAD_FAILED %s\n", tool_names[k].c_str());
      failed.push_back(tool_names[k]);
      continue;
    }
    typedef bool (*OnLoadFn)(HsaApiTable*, uint64_t, uint64_t, const char* const*);
    OnLoadFn on_load = (OnLoadFn)dlsym(lib, "OnLoad");
    void (*on_unload)() = (void (*)())dlsym(lib, "OnUnload");
    if (!on_load || !on_unload) { fprintf(stderr, "OnLoad/OnUnload not exported\n"); return 2; }
    std::vector<const char*> names;
    for (auto& f : failed) names.push_back(f.c_str());
    bool ok = on_load(&tables.root, 1, names.size(), names.empty() ? nullptr : names.data());
    printf("ONLOAD %d\n", ok ? 1 : 0);
    if (ok) unloads.push_back(on_unload);
    else failed.push_back(tool_names[k]);
  }
  fflush(stdout);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; t++) {
    pool.emplace_back([t, &loads] {
      for (size_t i = 0; i < loads.size(); i++)
        load_one("t" + std::to_string(t) + "-" + std::to_string(i), loads[i]);
    });
  }
  for (auto& th : pool) th.join();
  printf("PRE_A memory=%d file=%d\n", a_memory.load(), a_file.load());
  fflush(stdout);
  for (auto u : unloads) u();
  return 0;
}
