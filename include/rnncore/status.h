/* rnncore — status codes shared by the C and C++ APIs.
 *
 * Every public call returns one of these codes. The message of a code is stable
 * (rnncore_status_message); the most recent failure on the calling thread also
 * leaves a detail line naming the offending argument, tensor or shape
 * (rnncore_last_error_detail).
 */
#ifndef RNNCORE_STATUS_H
#define RNNCORE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/** Result of every public call. Values are stable across versions. */
typedef enum rnncore_status {
  RNNCORE_OK = 0,
  RNNCORE_ERR_NULL_POINTER = 1,        /**< a required pointer argument is null */
  RNNCORE_ERR_INVALID_ENUM = 2,        /**< an enum argument has a value outside its range */
  RNNCORE_ERR_INVALID_SIZE = 3,        /**< a size is zero, negative or too large */
  RNNCORE_ERR_SKIP_NEEDS_EQUAL_SIZES = 4, /**< input_mode skip needs input_size == hidden_size */
  RNNCORE_ERR_UNSUPPORTED = 5,         /**< a valid combination this build or backend does not support */
  RNNCORE_ERR_BATCH_TOO_LARGE = 6,     /**< batch exceeds the plan's max_batch */
  RNNCORE_ERR_SEQ_TOO_LONG = 7,        /**< seq_len exceeds the plan's max_seq_len */
  RNNCORE_ERR_BAD_LENGTH = 8,          /**< a per-row sequence length is negative or exceeds seq_len */
  RNNCORE_ERR_BUFFER_TOO_SMALL = 9,    /**< a caller buffer is smaller than the plan requires */
  RNNCORE_ERR_MISALIGNED = 10,         /**< a caller buffer is not aligned to RNNCORE_ALIGNMENT bytes */
  RNNCORE_ERR_WEIGHTS_NOT_PACKED = 11, /**< the packed-weight buffer was not filled by pack_weights for this plan */
  RNNCORE_ERR_TENSOR_MISSING = 12,     /**< a weight tensor the spec needs is missing */
  RNNCORE_ERR_TENSOR_SHAPE = 13,       /**< a tensor has the wrong shape */
  RNNCORE_ERR_TENSOR_DTYPE = 14,       /**< a tensor has an unsupported element type */
  RNNCORE_ERR_TENSOR_UNEXPECTED = 15,  /**< a tensor does not belong to the spec (e.g. a layer beyond num_layers) */
  RNNCORE_ERR_BAD_PROBABILITY = 16,    /**< a keep or dropout probability is out of range */
  RNNCORE_ERR_WIDTH_MISMATCH = 17,     /**< a residual connection joins tensors of different widths */
  RNNCORE_ERR_BACKEND_UNAVAILABLE = 18, /**< the requested backend is not built or not present */
  RNNCORE_ERR_IO = 19,                 /**< a file could not be opened, read or written */
  RNNCORE_ERR_FORMAT = 20,             /**< a file or header is truncated or malformed */
  RNNCORE_ERR_OUT_OF_MEMORY = 21,      /**< an allocation failed (convenience owners only) */
  RNNCORE_ERR_INTERNAL = 22,           /**< a bug in rnncore; please report it */
  RNNCORE_ERR_DEVICE = 23,             /**< the GPU runtime reported an error */
  RNNCORE_STATUS_COUNT_ = 24
} rnncore_status;

/** Stable, human-readable message of a status code (never null). */
const char* rnncore_status_message(rnncore_status status);

/** Detail of the most recent failing call on this thread, e.g. which tensor had
 *  which shape; "" after a successful call sequence. Valid until the next call. */
const char* rnncore_last_error_detail(void);

#ifdef __cplusplus
}
#endif

#endif /* RNNCORE_STATUS_H */
