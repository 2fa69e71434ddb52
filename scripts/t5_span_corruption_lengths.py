#!/usr/bin/env python3
"""Known answers for T5 span corruption's deterministic parts (tests/span_corruption).

Prints, as C++ initialisers for tests/span_corruption/test_span_corruption.cpp:
  - random_spans_helper(inputs_length, noise_density, mean_noise_span_length, 1, 1) of T5's
    t5/data/preprocessors.py (transcribed below, Python floats as there): the raw token
    length per example and the target length, for several inputs lengths and densities;
  - the noise token and noise span counts of random_spans_noise_mask for several lengths,
    computed in float32 with rounding half to even as TensorFlow's tf.round does.
Usage (not part of CI; needs NumPy):
  /work/.venvs/torch/bin/python scripts/t5_span_corruption_lengths.py
"""
import numpy as np


def random_spans_helper(inputs_length, noise_density, mean_noise_span_length,
                        extra_tokens_per_span_inputs=1, extra_tokens_per_span_targets=1):
    """T5's random_spans_helper, line for line (verbose off)."""
    def _tokens_length_to_inputs_length_targets_length(tokens_length):
        num_noise_tokens = int(round(tokens_length * noise_density))
        num_nonnoise_tokens = tokens_length - num_noise_tokens
        num_noise_spans = int(round(num_noise_tokens / mean_noise_span_length))
        # inputs contain all nonnoise tokens, sentinels for all noise spans
        # and one EOS token.
        return (
            num_nonnoise_tokens + num_noise_spans * extra_tokens_per_span_inputs + 1,
            num_noise_tokens + num_noise_spans * extra_tokens_per_span_targets + 1)

    tokens_length = inputs_length - 1
    while (_tokens_length_to_inputs_length_targets_length(tokens_length + 1)[0]
           <= inputs_length):
        tokens_length += 1
    inputs_length, targets_length = (
        _tokens_length_to_inputs_length_targets_length(tokens_length))
    # minor hack to get the targets length to be equal to inputs length
    # which is more likely to have been set to a nice round number.
    if noise_density == 0.5 and targets_length > inputs_length:
        tokens_length -= 1
        targets_length -= 1
    return tokens_length, targets_length


def noise_counts(length, noise_density, mean_noise_span_length):
    """The deterministic counts of T5's random_spans_noise_mask (float32, tf.round)."""
    if noise_density == 0.0:
        return 0, 0
    length = max(length, 2)
    num_noise_tokens = int(np.round(np.float32(length) * np.float32(noise_density)))
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.round(np.float32(num_noise_tokens) /
                                   np.float32(mean_noise_span_length)))
    return num_noise_tokens, max(num_noise_spans, 1)


def main():
    print("// {inputs_length, noise_density, mean_noise_span_length, tokens_length, targets_length}")
    for inputs_length in (64, 114, 128, 256, 512, 568, 1024):
        for density, mean in ((0.15, 3.0), (0.5, 3.0), (0.3, 8.0)):
            t, g = random_spans_helper(inputs_length, density, mean)
            print(f"{{{inputs_length}, {density}, {mean}, {t}, {g}}},")
    print("// {length, noise_density, mean_noise_span_length, noise_tokens, noise_spans}")
    for length in (1, 2, 3, 7, 10, 20, 50, 100, 114, 512, 568):
        for density, mean in ((0.15, 3.0), (0.5, 2.0)):
            n, s = noise_counts(length, density, mean)
            print(f"{{{length}, {density}, {mean}, {n}, {s}}},")


if __name__ == "__main__":
    main()
