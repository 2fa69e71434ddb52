// MpiGroupBase: the collectives over MPI (see mpi_group.hpp).
#include "mpi_group.hpp"

#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_datatypes.hpp"

namespace patchbay_parallel_mpi {
namespace {

using patchbay::PluginError;
using patchbay::Tensor;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

void check(int code, const std::string& what) {
  if (code != MPI_SUCCESS)
    throw PluginError(PB_STATUS_INTERNAL, what + " failed: " + mpi_error_text(code));
}

// MPI's lifetime in this process: initialised by the first group, finalised by this static
// object's destructor (plugin unload or process exit) when we initialised it.
struct MpiRuntime {
  bool initialised_here = false;
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!initialised_here || finalized) return;
    free_mpi_types();
    MPI_Finalize();
  }
  void ensure_started() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) {
      throw PluginError(
          PB_STATUS_UNSUPPORTED,
          "MPI was already finalised in this process and cannot start again; create the MPI "
          "group once per process and keep the parallel_mpi plugin loaded while it is used");
    }
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (initialised) return;
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    initialised_here = true;
    if (provided < MPI_THREAD_SERIALIZED) {
      throw PluginError(PB_STATUS_UNSUPPORTED,
                        "the MPI library provides thread level " + std::to_string(provided) +
                            " but the trainer needs MPI_THREAD_SERIALIZED (" +
                            std::to_string(MPI_THREAD_SERIALIZED) + ")");
    }
  }
};
MpiRuntime g_runtime;

// A contiguous host view of a tensor's elements: the tensor's own storage when it is a
// contiguous CPU tensor, otherwise a staging copy written back by commit().
class HostElements {
 public:
  HostElements(const Tensor& t, bool read) : tensor_(t) {
    const pb_ops_table* ops = t.ops();
    bytes_ = static_cast<size_t>(t.numel()) * dtype_size(t.dtype());
    direct_ = ops->device_type(t.handle()) == PB_DEVICE_CPU && t.is_contiguous();
    if (direct_) {
      data_ = bytes_ == 0 ? nullptr : t.data<unsigned char>();
      return;
    }
    staging_.resize(bytes_);
    data_ = staging_.data();
    if (read && bytes_ > 0)
      patchbay::check_ops_status(ops, ops->copy_to_host(t.handle(), staging_.data(), bytes_),
                                 "staging copy in");
  }
  void commit() {
    if (direct_ || bytes_ == 0) return;
    patchbay::check_ops_status(
        tensor_.ops(), tensor_.ops()->copy_from_host(tensor_.handle(), staging_.data(), bytes_),
        "staging copy out");
  }
  unsigned char* data() { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  Tensor tensor_;
  std::vector<unsigned char> staging_;
  unsigned char* data_ = nullptr;
  size_t bytes_ = 0;
  bool direct_ = false;
};

// Element counts cross MPI as int: calls are split into chunks of at most this many elements.
constexpr size_t kMaxChunk = static_cast<size_t>(INT_MAX) / 8;

int as_count(size_t n, const char* what) {
  if (n > static_cast<size_t>(INT_MAX)) {
    throw PluginError(PB_STATUS_INVALID_ARGUMENT,
                      std::string(what) + ": " + std::to_string(n) +
                          " elements per rank exceed MPI's int count (" + std::to_string(INT_MAX) +
                          "); split the tensor");
  }
  return static_cast<int>(n);
}

// x /= world for AVG, in x's own dtype.
void divide_in_place(unsigned char* data, size_t n, pb_dtype dtype, int64_t world) {
  switch (dtype) {
    case PB_DTYPE_F32: {
      auto* p = reinterpret_cast<float*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= static_cast<float>(world);
      return;
    }
    case PB_DTYPE_BF16:
    case PB_DTYPE_F16: {
      auto* p = reinterpret_cast<uint16_t*>(data);
      const bool bf = dtype == PB_DTYPE_BF16;
      for (size_t i = 0; i < n; ++i) {
        const float v = (bf ? bf16_to_float(p[i]) : f16_to_float(p[i])) / static_cast<float>(world);
        p[i] = bf ? float_to_bf16(v) : float_to_f16(v);
      }
      return;
    }
    case PB_DTYPE_I32: {
      auto* p = reinterpret_cast<int32_t*>(data);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<int32_t>(p[i] / world);
      return;
    }
    case PB_DTYPE_I64: {
      auto* p = reinterpret_cast<int64_t*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= world;
      return;
    }
  }
}

// An MPI_Iallreduce in flight: the tensor (and its staging copy) stay alive until wait().
class PendingAllReduce : public patchbay::PendingCollective {
 public:
  PendingAllReduce(const Tensor& t, pb_collective_op op, int64_t world, MPI_Comm comm)
      : elements_(t, /*read=*/true),
        dtype_(t.dtype()),
        n_(static_cast<size_t>(t.numel())),
        op_(op),
        world_(world) {
    const int count = as_count(n_, "all_reduce_start");
    check(MPI_Iallreduce(MPI_IN_PLACE, elements_.data(), count, mpi_datatype(dtype_),
                         mpi_reduce_op(dtype_, op == PB_COLLECTIVE_MAX), comm, &request_),
          "MPI_Iallreduce");
  }
  ~PendingAllReduce() override {
    if (request_ != MPI_REQUEST_NULL) MPI_Wait(&request_, MPI_STATUS_IGNORE);
  }
  void wait() override {
    check(MPI_Wait(&request_, MPI_STATUS_IGNORE), "MPI_Wait (all_reduce)");
    if (op_ == PB_COLLECTIVE_AVG) divide_in_place(elements_.data(), n_, dtype_, world_);
    elements_.commit();
  }

 private:
  HostElements elements_;
  pb_dtype dtype_;
  size_t n_;
  pb_collective_op op_;
  int64_t world_;
  MPI_Request request_ = MPI_REQUEST_NULL;
};

}  // namespace

std::unique_ptr<patchbay::PendingCollective> MpiGroupBase::all_reduce_start(const Tensor& tensor,
                                                                            pb_collective_op op) {
  return std::make_unique<PendingAllReduce>(tensor, op, world_, comm_);
}

void MpiGroupBase::abort_job(int32_t exit_code, const std::string& message) {
  std::fprintf(stderr, "patchbay: rank %lld of %lld ends the job: %s\n",
               static_cast<long long>(rank_), static_cast<long long>(world_), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, exit_code);
}

MpiGroupBase::MpiGroupBase(const patchbay::Host& /*host*/) {
  g_runtime.ensure_started();
  mpi_types();
  check(MPI_Comm_dup(MPI_COMM_WORLD, &comm_), "MPI_Comm_dup");
  check(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  int rank = 0, size = 1;
  check(MPI_Comm_rank(comm_, &rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm_, &size), "MPI_Comm_size");
  rank_ = rank;
  world_ = size;
}

MpiGroupBase::~MpiGroupBase() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void MpiGroupBase::all_reduce(const Tensor& tensor, pb_collective_op op) {
  HostElements x(tensor, /*read=*/true);
  const size_t n = static_cast<size_t>(tensor.numel());
  const size_t size = dtype_size(tensor.dtype());
  const MPI_Datatype type = mpi_datatype(tensor.dtype());
  const MPI_Op mpi_op = mpi_reduce_op(tensor.dtype(), op == PB_COLLECTIVE_MAX);
  for (size_t begin = 0; begin < n; begin += kMaxChunk) {
    const size_t count = std::min(kMaxChunk, n - begin);
    check(MPI_Allreduce(MPI_IN_PLACE, x.data() + begin * size, static_cast<int>(count), type,
                        mpi_op, comm_),
          "MPI_Allreduce");
  }
  if (op == PB_COLLECTIVE_AVG) divide_in_place(x.data(), n, tensor.dtype(), world_);
  x.commit();
}

void MpiGroupBase::broadcast(const Tensor& tensor, int64_t root) {
  HostElements x(tensor, /*read=*/rank_ == root);
  const size_t n = static_cast<size_t>(tensor.numel());
  const size_t size = dtype_size(tensor.dtype());
  const MPI_Datatype type = mpi_datatype(tensor.dtype());
  for (size_t begin = 0; begin < n; begin += kMaxChunk) {
    const size_t count = std::min(kMaxChunk, n - begin);
    check(MPI_Bcast(x.data() + begin * size, static_cast<int>(count), type, static_cast<int>(root),
                    comm_),
          "MPI_Bcast");
  }
  x.commit();
}

void MpiGroupBase::all_gather(const Tensor& in, const Tensor& out) {
  HostElements src(in, /*read=*/true);
  HostElements dst(out, /*read=*/false);
  const int count = as_count(static_cast<size_t>(in.numel()), "all_gather");
  const MPI_Datatype type = mpi_datatype(in.dtype());
  check(MPI_Allgather(src.data(), count, type, dst.data(), count, type, comm_), "MPI_Allgather");
  dst.commit();
}

void MpiGroupBase::reduce_scatter(const Tensor& in, const Tensor& out, pb_collective_op op) {
  HostElements src(in, /*read=*/true);
  HostElements dst(out, /*read=*/false);
  const int count = as_count(static_cast<size_t>(out.numel()), "reduce_scatter");
  const MPI_Datatype type = mpi_datatype(in.dtype());
  const MPI_Op mpi_op = mpi_reduce_op(in.dtype(), op == PB_COLLECTIVE_MAX);
  check(MPI_Reduce_scatter_block(src.data(), dst.data(), count, type, mpi_op, comm_),
        "MPI_Reduce_scatter_block");
  if (op == PB_COLLECTIVE_AVG)
    divide_in_place(dst.data(), static_cast<size_t>(out.numel()), out.dtype(), world_);
  dst.commit();
}

void MpiGroupBase::barrier() { check(MPI_Barrier(comm_), "MPI_Barrier"); }

}  // namespace patchbay_parallel_mpi
