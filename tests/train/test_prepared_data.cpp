// Reading prepared token shards for training (core/train/window_sampler.hpp,
// core/data/token_sequence.hpp, [data] prepared / sampling):
//   - the epoch permutation is a bijection for any size, and a new one each epoch;
//   - "epochs" reads every packed window exactly once per epoch; "documents" starts windows at
//     document starts; both a pure function of (seed, step, micro);
//   - shards read as one stream across their boundaries;
//   - a run on a prepared dataset records epochs in metrics.jsonl and resumes bit for bit;
//   - a tokenizer other than the one the data was prepared with is refused, naming both hashes;
//   - a training shard that vanishes or is truncated mid-run stops the run with an error naming
//     it; the last checkpoint and the metrics before it are kept, and the run resumes once the
//     data is back;
//   - mixtures by weight and by epochs keep their proportions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "data/prepare.hpp"
#include "data/split.hpp"
#include "data/token_sequence.hpp"
#include "data/tokenizer_io.hpp"
#include "run/metrics_log.hpp"
#include "train/checkpoint.hpp"
#include "train/trainer.hpp"
#include "train/training_data.hpp"
#include "train/window_sampler.hpp"
#include "train_fixture.hpp"

using namespace patchbay;
using train::testing::TinySetup;
namespace fs = std::filesystem;

namespace {

data::TokenCache counting_file(const fs::path& file, int32_t first, int32_t count) {
  std::vector<int32_t> ids;
  for (int32_t i = 0; i < count; ++i) ids.push_back(first + i);
  data::TokenCacheInfo info;
  info.vocab_size = 100000;
  info.tokenizer_kind = "test";
  data::write_token_cache(file, ids, info);
  return data::TokenCache::open(file);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

// The tiny corpus prepared into shards with a char tokenizer trained on it; returns the
// config overrides that train on it. With `mixture`, the documents are prepared as two
// datasets, a (the first 24) and b (the other 16), and the overrides make a 3 : 1 mixture.
std::vector<std::string> prepare_tiny(TinySetup& setup, const fs::path& folder,
                                      bool mixture = false) {
  train::testing::write_tiny_corpus(folder);
  fs::create_directories(folder / "docs");
  const std::string text = data::read_text_file(folder / "corpus.txt");
  for (int d = 0; d < 40; ++d)  // 40 documents of ~1 KB
    std::ofstream(folder / "docs" / (std::string("d") + std::to_string(100 + d) + ".txt"))
        << text.substr(static_cast<size_t>(d) * 1000, 1000);
  data::TokenizerSettings settings;
  settings.kind = "char";
  runtime::TokenizerHandle tokenizer = data::create_tokenizer(setup.registry, settings);
  tokenizer.train(text);
  tokenizer.save((folder / "char.tok").string());
  data::PrepareOptions o;
  o.sources = {{folder / "docs", {}, {}, "text"}};
  o.out = folder / "prepared";
  o.val_fraction = 0.2;
  o.shard_bytes = 8000;
  if (!mixture) {
    data::prepare_dataset(o, {&tokenizer, "char", folder / "char.tok"});
    return {"data.prepared=\"" + (folder / "prepared").string() + "\""};
  }
  o.sources = {{folder / "docs",
                {"d10*", "d11*", "d120.txt", "d121.txt", "d122.txt", "d123.txt"},
                {},
                "text"}};
  o.out = folder / "a";
  data::prepare_dataset(o, {&tokenizer, "char", folder / "char.tok"});
  o.sources = {{folder / "docs",
                {},
                {"d10*", "d11*", "d120.txt", "d121.txt", "d122.txt", "d123.txt"},
                "text"}};
  o.out = folder / "b";
  data::prepare_dataset(o, {&tokenizer, "char", folder / "char.tok"});
  return {"data.sources=[{prepared = \"" + (folder / "a").string() +
          "\", weight = 3.0}, {prepared = \"" + (folder / "b").string() + "\", weight = 1.0}]"};
}

}  // namespace

TEST_CASE("the epoch permutation is a bijection of [0, n), different for each key") {
  for (uint64_t n : {1ull, 2ull, 3ull, 7ull, 64ull, 1000ull, 4097ull}) {
    std::set<uint64_t> seen;
    for (uint64_t p = 0; p < n; ++p) seen.insert(train::permuted_index(p, n, 42));
    CHECK(seen.size() == n);
    CHECK(*seen.rbegin() == n - 1);
  }
  int moved = 0;
  for (uint64_t p = 0; p < 1000; ++p)
    moved += train::permuted_index(p, 1000, 1) != train::permuted_index(p, 1000, 2);
  CHECK(moved > 900);
}

TEST_CASE("epochs read every packed window once per epoch; documents start at document starts") {
  const auto folder = train::testing::fresh_folder("sampler");
  const data::TokenSequence stream =
      data::TokenSequence::of(counting_file(folder / "a.tokens", 0, 1001));
  const int64_t rows = 4, accum = 2, seq_len = 10;  // W = 100 windows: 12.5 steps an epoch
  const train::WindowSampler epochs(stream, {}, train::Sampling::kEpochs, rows, accum, seq_len);
  CHECK(epochs.epoch_size() == 100);
  std::multiset<int32_t> starts;
  std::vector<int32_t> order[2];
  for (int64_t step = 0; step < 25; ++step)
    for (int64_t micro = 0; micro < accum; ++micro) {
      const std::vector<float> ids = epochs.training_windows(9, step, micro).ids.to_vector();
      for (int64_t r = 0; r < rows; ++r) {
        const auto first = static_cast<int32_t>(ids[static_cast<size_t>(r * (seq_len + 1))]);
        CHECK(first % seq_len == 0);  // packed: window w starts at w * T
        CHECK(ids[static_cast<size_t>(r * (seq_len + 1) + seq_len)] ==
              static_cast<float>(first + seq_len));
        const int64_t sample = (step * accum + micro) * rows + r;
        order[sample / 100].push_back(first);
        if (sample < 100) starts.insert(first);
      }
    }
  CHECK(starts.size() == 100);
  CHECK(std::set<int32_t>(starts.begin(), starts.end()).size() == 100);  // each window once
  CHECK(order[0] != order[1]);                                           // a new order
  std::vector<int32_t> second = order[1];
  std::sort(second.begin(), second.end());
  std::vector<int32_t> first = order[0];
  std::sort(first.begin(), first.end());
  CHECK(first == second);
  CHECK(*epochs.epochs_after(25) == doctest::Approx(2.0));
  // A pure function of (seed, step, micro): another sampler object, same windows.
  const train::WindowSampler again(stream, {}, train::Sampling::kEpochs, rows, accum, seq_len);
  CHECK(again.training_windows(9, 17, 1).ids.to_vector() ==
        epochs.training_windows(9, 17, 1).ids.to_vector());
  CHECK(again.training_windows(8, 17, 1).ids.to_vector() !=
        epochs.training_windows(9, 17, 1).ids.to_vector());

  const std::vector<uint64_t> documents = {0, 37, 200, 555, 995};
  const train::WindowSampler docs(stream, documents, train::Sampling::kDocuments, 5, 1, seq_len);
  std::set<float> firsts;
  const std::vector<float> ids = docs.training_windows(3, 0, 0).ids.to_vector();
  for (int r = 0; r < 5; ++r) firsts.insert(ids[static_cast<size_t>(r * (seq_len + 1))]);
  CHECK(firsts == std::set<float>{0, 37, 200, 555, 990});  // 995 moved back to N - T - 1
  CHECK(error_of([&] {
          train::WindowSampler(stream, {}, train::Sampling::kDocuments, 1, 1, 10);
        }).find("needs document boundaries") != std::string::npos);
}

TEST_CASE("shards read as one stream across their boundaries") {
  const auto folder = train::testing::fresh_folder("sequence");
  counting_file(folder / "a.tokens", 0, 5);
  counting_file(folder / "b.tokens", 5, 0);  // an empty shard
  counting_file(folder / "c.tokens", 5, 7);
  const data::TokenSequence s =
      data::TokenSequence::open({folder / "a.tokens", folder / "b.tokens", folder / "c.tokens"});
  CHECK(s.size() == 12);
  std::vector<int32_t> window(6);
  s.copy(3, window);
  CHECK(window == std::vector<int32_t>{3, 4, 5, 6, 7, 8});
  CHECK(s.to_vector().back() == 11);
  CHECK_THROWS(s.copy(8, window));
  CHECK(error_of([&] {
          data::TokenSequence::open({folder / "a.tokens"}, 12345);
        }).find("never mix") != std::string::npos);
}

TEST_CASE(
    "training on a prepared dataset: epochs in metrics, bit-identical resume, tokenizer checked") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("prepared_run");
  const std::vector<std::string> prepared = prepare_tiny(setup, folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  for (const std::string sampling : {"epochs", "documents"}) {
    CAPTURE(sampling);
    std::vector<std::string> straight = prepared;
    straight.push_back("data.sampling=\"" + sampling + "\"");
    std::vector<std::string> cut = straight;
    straight.push_back("train.out_dir=\"" + (folder / ("straight_" + sampling)).string() + "\"");
    cut.push_back("train.out_dir=\"" + (folder / ("resumed_" + sampling)).string() + "\"");
    const train::TrainSummary full =
        train::train_model(setup.config(text, straight), setup.registry, setup.lookup, quiet);
    REQUIRE(full.steps_done == 6);
    const std::vector<nlohmann::json> records =
        run::read_metrics(folder / ("straight_" + sampling) / "metrics.jsonl");
    bool has_epoch = false;
    for (const nlohmann::json& r : records)
      if (r.contains("loss")) {
        REQUIRE(r.contains("epoch"));
        CHECK(r["epoch"].get<double>() > 0);
        has_epoch = true;
      }
    CHECK(has_epoch);

    const config::ResolvedConfig resumed_config = setup.config(text, cut);
    train::TrainRequest stop_at_3 = quiet;
    stop_at_3.before_step = [](int64_t step, const std::vector<model::NamedParameter>&) {
      if (step == 3) throw std::runtime_error("interrupted");
    };
    CHECK_THROWS_WITH(train::train_model(resumed_config, setup.registry, setup.lookup, stop_at_3),
                      "interrupted");
    train::TrainRequest resume = quiet;
    resume.resume = folder / ("resumed_" + sampling);
    const train::TrainSummary second =
        train::train_model(resumed_config, setup.registry, setup.lookup, resume);
    CHECK(second.start_step == 3);
    CHECK(second.last_loss == full.last_loss);
    const train::Checkpoint a = train::load_checkpoint(folder / ("straight_" + sampling));
    const train::Checkpoint b = train::load_checkpoint(folder / ("resumed_" + sampling));
    REQUIRE(a.names() == b.names());
    for (const std::string& name : a.names()) {
      const engine::Tensor x = a.tensor(name), y = b.tensor(name);
      CHECK(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0);
    }
  }

  // Another tokenizer file than the one the shards were made with: refused, both hashes named.
  data::TokenizerSettings settings;
  settings.kind = "char";
  runtime::TokenizerHandle other = data::create_tokenizer(setup.registry, settings);
  other.train("something else entirely");
  other.save((folder / "other.tok").string());
  std::vector<std::string> wrong = prepared;
  wrong.push_back("tokenizer.file=\"" + (folder / "other.tok").string() + "\"");
  wrong.push_back("train.out_dir=\"" + (folder / "wrong").string() + "\"");
  const std::string message = error_of(
      [&] { train::train_model(setup.config(text, wrong), setup.registry, setup.lookup, quiet); });
  CHECK(message.find("never mix") != std::string::npos);
  char other_hash[17];
  std::snprintf(
      other_hash, sizeof other_hash, "%016llx",
      static_cast<unsigned long long>(data::fnv1a64(data::read_text_file(folder / "other.tok"))));
  CHECK(message.find(other_hash) != std::string::npos);
  CHECK(error_of([&] {
          train::train_model(setup.config(text, {"data.sampling=\"documents\""}), setup.registry,
                             setup.lookup, quiet);
        }).find("needs document boundaries") != std::string::npos);
}

TEST_CASE("a two-source mixture trains with per-source validation and exact proportions") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("mixture_run");
  const std::vector<std::string> mixture = prepare_tiny(setup, folder, true);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  std::vector<std::string> overrides = mixture;
  overrides.push_back("train.out_dir=\"" + (folder / "run").string() + "\"");
  const config::ResolvedConfig c = setup.config(text, overrides);
  CHECK(c.find("data.sources")->as_array()->get(1)->as_table()->get("name")->value<std::string>() ==
        "b");
  const train::TrainSummary run = train::train_model(c, setup.registry, setup.lookup, quiet);
  REQUIRE(run.steps_done == 6);
  bool evaluated = false;
  for (const nlohmann::json& r : run::read_metrics(folder / "run" / "metrics.jsonl")) {
    if (r.contains("val_loss")) {
      REQUIRE(r.contains("val_loss.a"));
      REQUIRE(r.contains("val_loss.b"));
      CHECK(r.contains("val_bpb.b"));
      const double a = r["val_loss.a"], b = r["val_loss.b"], ta = r["val_tokens.a"],
                   tb = r["val_tokens.b"];
      CHECK(r["val_loss"].get<double>() == doctest::Approx((a * ta + b * tb) / (ta + tb)));
      evaluated = true;
    } else if (r.contains("loss")) {
      // 4 rows a step: after s steps, 4 s samples, three quarters from a (within 2).
      const double samples = 4.0 * r["step"].get<double>();
      CHECK(std::fabs(r["samples.a"].get<double>() - 0.75 * samples) < 2.0);
      CHECK(r["samples.a"].get<double>() + r["samples.b"].get<double>() == samples);
      CHECK(r.contains("epoch.b"));
    }
  }
  CHECK(evaluated);

  // Refusals: a zero weight, a repeated name, data.prepared beside data.sources.
  CHECK(error_of([&] {
          setup.config(text, {"data.sources=[{prepared = \"x\", weight = 0.0}]"});
        }).find("data.sources[0].weight is 0") != std::string::npos);
  CHECK(error_of([&] {
          setup.config(text, {"data.sources=[{prepared = \"x/a\"}, {prepared = \"y/a\"}]"});
        }).find("used twice") != std::string::npos);
  CHECK(error_of([&] {
          setup.config(text, {"data.sources=[{prepared = \"x\"}]", "data.prepared=\"y\""});
        }).find("both set") != std::string::npos);
  CHECK(error_of([&] {
          setup.config(text, {"data.sources=[{prepared = \"x\", weight = -2.0}]"});
        }).find("data.sources[0].weight is -2") != std::string::npos);
}

TEST_CASE("a mixture by epochs reads each source exactly its epochs per pass") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("mixture_epochs_run");
  prepare_tiny(setup, folder, true);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  const std::string a = (folder / "a").string(), b = (folder / "b").string();
  const config::ResolvedConfig c =
      setup.config(text, {"data.sources=[{prepared = \"" + a + "\", epochs = 1}, {prepared = \"" +
                              b + "\", epochs = 2}]",
                          "train.out_dir=\"" + (folder / "run").string() + "\""});
  CHECK(c.find("data.sources")->as_array()->get(0)->as_table()->get("weight") == nullptr);
  const train::TrainSummary run = train::train_model(c, setup.registry, setup.lookup, quiet);
  REQUIRE(run.steps_done == 6);
  bool checked = false;
  for (const nlohmann::json& r : run::read_metrics(folder / "run" / "metrics.jsonl")) {
    if (!r.contains("samples.a")) continue;
    // Windows per epoch W = samples / epochs; a pass is W_a + 2 W_b samples, a's share W_a / T.
    const double sa = r["samples.a"], sb = r["samples.b"], ea = r["epoch.a"], eb = r["epoch.b"];
    if (sa == 0 || sb == 0) continue;  // W from samples / epochs needs both drawn
    const double wa = std::round(sa / ea), wb = std::round(sb / eb),
                 samples = 4.0 * r["step"].get<double>();
    CHECK(sa + sb == samples);
    CHECK(std::fabs(sa - samples * wa / (wa + 2 * wb)) < 1.0);  // two sources: within 1
    if (samples >= wa + 2 * wb) CHECK(eb >= 2 * std::floor(samples / (wa + 2 * wb)));
    checked = true;
  }
  CHECK(checked);
  // Refusals: epochs beside a weight, a weight on one source and epochs on another, epochs 0.
  CHECK(error_of([&] {
          setup.config(text, {"data.sources=[{prepared = \"x\", weight = 1.0, epochs = 2}]"});
        }).find("both weight and epochs") != std::string::npos);
  CHECK(error_of([&] {
          setup.config(text,
                       {"data.sources=[{prepared = \"x/a\", epochs = 1}, {prepared = \"y/b\"}]"});
        }).find("give every source epochs") != std::string::npos);
  CHECK(error_of([&] {
          setup.config(text, {"data.sources=[{prepared = \"x\", epochs = 0}]"});
        }).find("data.sources[0].epochs must be a positive number") != std::string::npos);
}

TEST_CASE(
    "a shard that vanishes or is truncated mid-run: a clear error, the last checkpoint kept") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("vanishing_shard");
  prepare_tiny(setup, folder);
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  for (const bool truncate : {true, false}) {
    CAPTURE(truncate);
    const std::string name = truncate ? "truncated" : "vanished";
    const fs::path dataset = folder / ("data_" + name), run_dir = folder / ("run_" + name);
    fs::copy(folder / "prepared", dataset, fs::copy_options::recursive);
    const config::ResolvedConfig c =
        setup.config(text, {"data.prepared=\"" + dataset.string() + "\"",
                            "train.out_dir=\"" + run_dir.string() + "\""});
    std::vector<fs::path> shards;  // every training shard: whichever a step reads is gone
    for (const auto& e : fs::directory_iterator(dataset))
      if (e.path().filename().string().rfind("train-", 0) == 0 && e.path().extension() == ".tokens")
        shards.push_back(e.path());
    REQUIRE(shards.size() > 1);
    train::TrainRequest cut = quiet;
    cut.before_step = [&](int64_t step, const std::vector<model::NamedParameter>&) {
      if (step != 4) return;
      for (const fs::path& shard : shards)
        truncate ? fs::resize_file(shard, 100) : (void)fs::remove(shard);
    };
    const std::string message =
        error_of([&] { train::train_model(c, setup.registry, setup.lookup, cut); });
    CHECK(message.find(truncate ? "was truncated while in use" : "vanished while in use") !=
          std::string::npos);
    CHECK(message.find(dataset.string() + "/train-") != std::string::npos);  // names the shard
    CHECK(message.find("resume from the last checkpoint") != std::string::npos);
    // The step-3 checkpoint is intact and the metrics end before the failure.
    CHECK(train::load_checkpoint(run_dir).step() == 3);
    int64_t last_step = 0;
    for (const nlohmann::json& r : run::read_metrics(run_dir / "metrics.jsonl"))
      last_step = r["step"].get<int64_t>();
    CHECK(last_step >= 3);
    CHECK(last_step <= 4);
    // With the data back, the run resumes from step 3 to its end.
    fs::remove_all(dataset);
    fs::copy(folder / "prepared", dataset, fs::copy_options::recursive);
    train::TrainRequest resume = quiet;
    resume.resume = run_dir;
    const train::TrainSummary resumed = train::train_model(c, setup.registry, setup.lookup, resume);
    CHECK(resumed.start_step == 3);
    CHECK(resumed.steps_done == 6);
  }
}

TEST_CASE("pack_documents: windows marked per document, carried into the batch") {
  const auto folder = train::testing::fresh_folder("packed_windows");
  const data::TokenSequence stream =
      data::TokenSequence::of(counting_file(folder / "a.tokens", 0, 1001));
  const std::vector<uint64_t> documents = {0, 37, 200, 555, 995};
  // Windows of T + 1 = 11 ids at 30 (crosses 37), 37 (starts a document), 195 (crosses 200),
  // 550 (crosses 555) and 990 (crosses 995).
  train::TokenWindows windows = train::validation_windows(stream, 0, 1, 5, 10);
  windows.starts = {30, 37, 195, 550, 990};
  for (int64_t r = 0; r < 5; ++r) {
    std::vector<int32_t> ids(11);
    stream.copy(windows.starts[static_cast<size_t>(r)], ids);
    std::copy(ids.begin(), ids.end(), windows.ids.data<int32_t>() + r * 11);
  }
  const train::TokenWindows marked = train::with_document_segments(windows, documents);
  const std::vector<float> segments = marked.segment_ids.to_vector();
  auto row = [&](int64_t r) {
    return std::vector<float>(segments.begin() + r * 11, segments.begin() + r * 11 + 11);
  };
  CHECK(row(0) == std::vector<float>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(row(1) == std::vector<float>(11, 0.0f));
  CHECK(row(2) == std::vector<float>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  CHECK(row(3) == std::vector<float>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  CHECK(row(4) == std::vector<float>{0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
  // The objective seam: next-token batches keep the inputs' segments [rows, T].
  const train::Batch batch = train::causal_batch(marked);
  REQUIRE(batch.segment_ids.defined());
  CHECK(batch.segment_ids.shape() == engine::Shape{5, 10});
  const std::vector<float> inputs_segments = batch.segment_ids.to_vector();
  CHECK(std::vector<float>(inputs_segments.begin(), inputs_segments.begin() + 10) ==
        std::vector<float>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1});
  CHECK(!train::causal_batch(windows).segment_ids.defined());  // no packing: none
  // The epochs sampler records where each window starts, so its windows can be marked too.
  const train::WindowSampler epochs(stream, {}, train::Sampling::kEpochs, 3, 1, 10);
  const train::TokenWindows sampled = epochs.training_windows(1, 0, 0);
  REQUIRE(sampled.starts.size() == 3);
  for (int64_t r = 0; r < 3; ++r)
    CHECK(sampled.ids.to_vector()[static_cast<size_t>(r * 11)] ==
          static_cast<float>(sampled.starts[static_cast<size_t>(r)]));
  CHECK(error_of([&] {
          train::with_document_segments(windows, {});
        }).find("needs document boundaries") != std::string::npos);
}

TEST_CASE("pack_documents trains on prepared data; refused where it cannot be honoured") {
  TinySetup setup;
  const auto folder = train::testing::fresh_folder("packed_run");
  prepare_tiny(setup, folder);  // the corpus and its char tokenizer
  // Short documents (~12 characters each), so that nearly every 17-id window crosses one.
  const std::string corpus = data::read_text_file(folder / "corpus.txt");
  fs::create_directories(folder / "short");
  for (int d = 0; d < 300; ++d)
    std::ofstream(folder / "short" / (std::string("s") + std::to_string(1000 + d) + ".txt"))
        << corpus.substr(static_cast<size_t>(d) * 12, 12);
  data::TokenizerSettings settings;
  settings.kind = "char";
  runtime::TokenizerHandle tokenizer = data::create_tokenizer(setup.registry, settings);
  tokenizer.load((folder / "char.tok").string());
  data::PrepareOptions options;
  options.sources = {{folder / "short", {}, {}, "text"}};
  options.out = folder / "short_prepared";
  options.val_fraction = 0.2;
  data::prepare_dataset(options, {&tokenizer, "char", folder / "char.tok"});
  const std::vector<std::string> prepared = {"data.prepared=\"" +
                                             (folder / "short_prepared").string() + "\""};
  train::TrainRequest quiet;
  quiet.show_progress = false;
  quiet.print_samples = false;
  const std::string text = train::testing::tiny_config_text(folder);
  std::vector<std::string> packed = prepared;
  packed.push_back("data.pack_documents=true");
  std::vector<std::string> plain = prepared;
  packed.push_back("train.out_dir=\"" + (folder / "packed").string() + "\"");
  plain.push_back("train.out_dir=\"" + (folder / "plain").string() + "\"");
  const train::TrainSummary a =
      train::train_model(setup.config(text, packed), setup.registry, setup.lookup, quiet);
  const train::TrainSummary b =
      train::train_model(setup.config(text, plain), setup.registry, setup.lookup, quiet);
  REQUIRE(a.steps_done == 6);
  CHECK(std::isfinite(a.last_loss));
  CHECK(a.last_loss != b.last_loss);  // the windows cross documents: packing changes them

  // The single-corpus form has no document boundaries.
  CHECK(error_of([&] {
          train::train_model(setup.config(text, {"data.pack_documents=true"}), setup.registry,
                             setup.lookup, quiet);
        }).find("needs one prepared dataset") != std::string::npos);
  // An attention kind without PB_ATTENTION_CAP_PACKED: refused before training, named.
  std::vector<std::string> linear = packed;
  linear.push_back("model.attention.kind=\"linear\"");
  linear.push_back("train.out_dir=\"" + (folder / "linear").string() + "\"");
  const std::string refused = error_of(
      [&] { train::train_model(setup.config(text, linear), setup.registry, setup.lookup, quiet); });
  CHECK(refused.find("attention 'linear'") != std::string::npos);
  CHECK(refused.find("cannot run packed sequences") != std::string::npos);
}
