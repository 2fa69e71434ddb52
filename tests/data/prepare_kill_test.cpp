// `patchbay data prepare --source ...` as a user meets it: the real process is killed with
// SIGKILL while it writes shards, then run again with the same command; the folder must end
// byte for byte equal to an uninterrupted run's. The same after a write failure (a file-size
// limit standing in for a full disk): a clear error, the finished shards intact, no half
// shard left, and a rerun completes it.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "data/tokenizer_io.hpp"
#include "patchbay/testing/temp_dir.hpp"
#include "runtime/registry.hpp"

namespace fs = std::filesystem;
using namespace patchbay;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::map<std::string, std::string> folder_files(const fs::path& folder) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(folder))
    files[e.path().filename().string()] = read_file(e.path());
  return files;
}

int count_shards(const fs::path& folder) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(folder, ec))
    if (e.path().extension() == ".tokens") ++n;
  return n;
}

// Starts `patchbay data prepare ARGS` (output to `log`), with an optional file-size limit.
pid_t start_prepare(const std::vector<std::string>& args, const fs::path& log,
                    rlim_t file_size_limit = 0) {
  std::vector<std::string> argv = {PATCHBAY_EXECUTABLE, "--plugin-path", PATCHBAY_TEST_PLUGIN_DIR,
                                   "data", "prepare"};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    if (file_size_limit > 0) {
      ::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead of a signal
      const struct rlimit limit { file_size_limit, file_size_limit };
      ::setrlimit(RLIMIT_FSIZE, &limit);
    }
    std::vector<char*> c_args;
    for (std::string& a : argv) c_args.push_back(a.data());
    c_args.push_back(nullptr);
    ::execv(c_args[0], c_args.data());
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Corpus {
  testing::TempDir dir{"prepare_kill"};
  fs::path tokenizer;
  // big_document: one document 20 times the others' size, so that its shard alone passes a
  // file-size limit that the other shards stay under.
  explicit Corpus(bool big_document = false) {
    std::string sample;
    fs::create_directories(dir / "src");
    for (int f = 0; f < 120; ++f) {
      std::string text;
      const int lines = big_document && f == 60 ? 2500 : 120;
      for (int line = 0; line < lines; ++line)
        text += "line " + std::to_string(line * 31 + f) + " of document " + std::to_string(f) +
                ": and it was so.\n";
      std::ofstream(dir / "src" / (std::string("doc") + std::to_string(10000 + f) + ".txt"),
                    std::ios::binary)
          << text;
      if (f < 3) sample += text;
    }
    runtime::Registry registry;
    registry.scan(runtime::plugin_search_path({}));
    data::TokenizerSettings settings;
    settings.kind = "char";
    runtime::TokenizerHandle t = data::create_tokenizer(registry, settings);
    t.train(sample);
    tokenizer = dir / "char.tok";
    t.save(tokenizer.string());
  }
  std::vector<std::string> args(const std::string& out) const {
    return {"--source",       (dir / "src").string(),
            "--tokenizer",    tokenizer.string(),
            "--out",          (dir / out).string(),
            "--shard-mb",     "0.03",
            "--val-fraction", "0.1",
            "--threads",      "2",
            "--no-progress"};
  }
};

}  // namespace

TEST_CASE(
    "kill -9 during preparation, then the same command: the same files as an uninterrupted run") {
  const Corpus c;
  REQUIRE(wait_exit(start_prepare(c.args("whole"), c.dir / "whole.log")) == 0);
  const auto whole = folder_files(c.dir / "whole");
  REQUIRE(whole.size() > 40);

  const pid_t pid = start_prepare(c.args("cut"), c.dir / "cut.log");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_shards(c.dir / "cut") < 4 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  ::kill(pid, SIGKILL);
  wait_exit(pid);
  INFO(read_file(c.dir / "cut.log"));
  REQUIRE_FALSE(fs::exists(c.dir / "cut/manifest.json"));  // killed before the end
  const int finished = count_shards(c.dir / "cut");
  CHECK(finished >= 4);

  REQUIRE(wait_exit(start_prepare(c.args("cut"), c.dir / "resume.log")) == 0);
  CHECK(read_file(c.dir / "resume.log").find("resumed: ") != std::string::npos);
  CHECK(folder_files(c.dir / "cut") == whole);
}

TEST_CASE("a write failure (full disk) says so, keeps the finished shards, and a rerun completes") {
  const Corpus c(true);
  REQUIRE(wait_exit(start_prepare(c.args("whole"), c.dir / "whole.log")) == 0);
  const auto whole = folder_files(c.dir / "whole");
  // Shards are about 22 KB but the one with the big document about 230 KB: the limit lets the
  // shards before it finish, then a write fails.
  CHECK(wait_exit(start_prepare(c.args("full"), c.dir / "full.log", 150000)) != 0);
  const std::string log = read_file(c.dir / "full.log");
  INFO(log);
  CHECK(log.find("file-size limit") != std::string::npos);
  CHECK(log.find("finished before are intact") != std::string::npos);
  int kept = 0;
  for (const auto& e : fs::directory_iterator(c.dir / "full")) {
    const std::string name = e.path().filename().string();
    CHECK(name.find(".partial") == std::string::npos);
    if (e.path().extension() != ".tokens") continue;
    CHECK(read_file(e.path()) == whole.at(name));
    ++kept;
  }
  CHECK(kept > 10);
  CHECK_FALSE(fs::exists(c.dir / "full/manifest.json"));
  REQUIRE(wait_exit(start_prepare(c.args("full"), c.dir / "rerun.log")) == 0);
  CHECK(folder_files(c.dir / "full") == whole);
}
