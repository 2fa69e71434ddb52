// Reading the KJV (through the `bible` program) and text files/folders into documents.
#include "data/corpus.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace patchbay::data {
namespace fs = std::filesystem;

size_t Corpus::bytes() const {
  size_t total = 0;
  for (const Document& d : documents) total += d.text.size();
  return total;
}

Corpus load_corpus(const std::string& source) {
  std::string lower = source;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "kjv") return load_kjv_corpus();
  return load_text_corpus(source);
}

namespace {

std::string run_and_capture(const std::string& command, int& exit_status) {
  std::FILE* pipe = popen((command + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) throw Error(ErrorKind::kIo, "cannot run '" + command + "'");
  std::string output;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return output;
}

std::string read_whole_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(ErrorKind::kIo, "cannot open '" + path.string() + "' for reading");
  std::ostringstream content;
  content << file.rdbuf();
  if (file.bad()) throw Error(ErrorKind::kIo, "reading '" + path.string() + "' failed");
  return content.str();
}

bool looks_like_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  char head[8192];
  file.read(head, sizeof head);
  return std::find(head, head + file.gcount(), '\0') == head + file.gcount();
}

bool is_hidden(const fs::path& relative) {
  for (const fs::path& part : relative) {
    const std::string s = part.string();
    if (!s.empty() && s[0] == '.' && s != "." && s != "..") return true;
  }
  return false;
}

}  // namespace

std::vector<Document> split_kjv_chapters(const std::string& printed) {
  // Shape: ["\n"] "Genesis 1\n" "\n" "  1 In the beginning ...\n" ... "\n" "Genesis 2\n" ...
  // A heading is a non-empty line that does not start with a space.
  std::vector<Document> chapters;
  std::istringstream lines(printed);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line[0] != ' ') {
      Document chapter{line, line};
      chapter.text.append("\n\n");
      chapters.push_back(std::move(chapter));
    } else if (!line.empty()) {
      if (chapters.empty()) throw Error(ErrorKind::kInvalidArgument, "bible output starts with a verse before any chapter heading");
      chapters.back().text.append(line).push_back('\n');
    }
  }
  return chapters;
}

Corpus load_kjv_corpus() {
  int exit_status = 0;
  const std::string printed = run_and_capture(kKjvCommand, exit_status);
  if (exit_status == 127 || (printed.empty() && exit_status != 0)) {
    throw Error(ErrorKind::kNotFound,
                "the default corpus (King James Bible) needs the `bible` program from Debian's "
                "bible-kjv package, which was not found or failed (exit status " +
                    std::to_string(exit_status) +
                    "). Install it with `sudo apt-get install bible-kjv`, or pass --corpus PATH "
                    "to use your own text file or folder");
  }
  Corpus corpus;
  corpus.source = "kjv";
  corpus.description = "King James Bible, Debian bible-kjv, printed by `";
  corpus.description.append(kKjvCommand).append("`");
  corpus.document_rule = "chapter";
  corpus.separator.assign(1, '\n');  // not = "\n": GCC 12 -Wrestrict false positive (PR 105329)
  corpus.documents = split_kjv_chapters(printed);
  if (corpus.documents.size() != 1189) {
    throw Error(ErrorKind::kInvalidArgument,
                "`" + std::string(kKjvCommand) + "` printed " + std::to_string(corpus.documents.size()) +
                    " chapters, expected 1189; is the bible-kjv-text data complete?");
  }
  return corpus;
}

std::vector<Document> split_into_blocks(const std::string& name, const std::string& text,
                                        size_t block_bytes) {
  std::vector<Document> blocks;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = std::min(text.size(), begin + block_bytes);
    if (end < text.size()) {
      const size_t newline = text.find('\n', end - 1);
      end = newline == std::string::npos ? text.size() : newline + 1;
    }
    blocks.push_back(Document{name + "#" + std::to_string(blocks.size()), text.substr(begin, end - begin)});
    begin = end;
  }
  return blocks;
}

Corpus load_text_corpus(const std::string& path_text) {
  const fs::path path(path_text);
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    throw Error(ErrorKind::kNotFound, "corpus '" + path_text + "' does not exist; give a text file, a folder of text files, or 'kjv'");
  }
  Corpus corpus;
  corpus.source = path_text;
  corpus.document_rule = "block of >= " + std::to_string(kBlockBytes) + " bytes ending at a newline";
  if (fs::is_regular_file(path)) {
    corpus.description = "text file " + path_text;
    corpus.documents = split_into_blocks(path.filename().string(), read_whole_file(path));
    return corpus;
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    const fs::path relative = fs::relative(entry.path(), path);
    if (!entry.is_regular_file() || is_hidden(relative)) continue;
    if (looks_like_text(entry.path())) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) throw Error(ErrorKind::kNotFound, "folder '" + path_text + "' holds no text files");
  corpus.description = "folder " + path_text + " (" + std::to_string(files.size()) + " text files, sorted by path)";
  for (const fs::path& file : files) {
    std::vector<Document> blocks = split_into_blocks(fs::relative(file, path).string(), read_whole_file(file));
    for (Document& block : blocks) corpus.documents.push_back(std::move(block));
  }
  return corpus;
}

}  // namespace patchbay::data
