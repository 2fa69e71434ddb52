// The two static_assert forms every ABI layout freeze uses (abi_layout_test.cpp,
// abi_layout_interfaces_test.cpp, ops_table_layout_test.cpp). Layouts are those of LP64
// Linux, the only target plugins are built for.
#pragma once

#include <cstddef>

#define FROZEN_OFFSET(type, field, offset) \
  static_assert(offsetof(type, field) == (offset), #type "." #field " moved: ABI break")
#define FROZEN_SIZE(type, size) static_assert(sizeof(type) == (size), #type " resized")
