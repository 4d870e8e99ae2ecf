// Runs a fuzz target over files (or directories of files) once each: the checked-in
// corpus, crashes found earlier included, as a regression test in every build.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int RunFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string d = ss.str();
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(d.data()), d.size());
  return 1;
}

int main(int argc, char** argv) {
  int n = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
      n += RunFile(argv[i]);
      continue;
    }
    DIR* d = opendir(argv[i]);
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') n += RunFile(std::string(argv[i]) + "/" + e->d_name);
    closedir(d);
  }
  std::printf("replayed %d inputs\n", n);
  return n > 0 ? 0 : 1;
}
