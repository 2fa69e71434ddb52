// sampler_basic: registers the built-in logits processors and selectors (one file each).
#include <patchbay/plugin.hpp>

#include "frequency_penalty.hpp"
#include "greedy.hpp"
#include "min_p.hpp"
#include "mirostat_v1.hpp"
#include "mirostat_v2.hpp"
#include "no_repeat_ngram.hpp"
#include "presence_penalty.hpp"
#include "repetition_penalty.hpp"
#include "sample.hpp"
#include "temperature.hpp"
#include "top_k.hpp"
#include "top_p.hpp"
#include "typical.hpp"

PATCHBAY_PLUGIN(
    "sampler_basic", "1.0.0",
    PATCHBAY_COMPONENT_LIST(&sampler_basic::kTemperature, &sampler_basic::kTopK,
                            &sampler_basic::kTopP, &sampler_basic::kMinP, &sampler_basic::kTypical,
                            &sampler_basic::kRepetitionPenalty, &sampler_basic::kFrequencyPenalty,
                            &sampler_basic::kPresencePenalty, &sampler_basic::kNoRepeatNgram,
                            &sampler_basic::kGreedy, &sampler_basic::kSample,
                            &sampler_basic::kMirostatV1, &sampler_basic::kMirostatV2));
