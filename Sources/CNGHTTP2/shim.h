#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <nghttp2/nghttp2.h>

// nghttp2's enums import as Swift structs with awkward names; fixed constants are clearer, and
// the data provider's `source` union does not import as a settable field.
static const int FCM_NGHTTP2_ERR_DEFERRED = NGHTTP2_ERR_DEFERRED;
static const int FCM_NGHTTP2_ERR_CALLBACK_FAILURE = NGHTTP2_ERR_CALLBACK_FAILURE;
static const int FCM_NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE = NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
static const uint32_t FCM_NGHTTP2_DATA_FLAG_EOF = NGHTTP2_DATA_FLAG_EOF;
static const uint8_t FCM_NGHTTP2_FLAG_END_STREAM = NGHTTP2_FLAG_END_STREAM;
static const uint8_t FCM_NGHTTP2_FLAG_END_HEADERS = NGHTTP2_FLAG_END_HEADERS;
static const uint8_t FCM_NGHTTP2_HEADERS = NGHTTP2_HEADERS;
static const uint8_t FCM_NGHTTP2_DATA = NGHTTP2_DATA;
static const uint8_t FCM_NGHTTP2_CONTINUATION = NGHTTP2_CONTINUATION;
static const int32_t FCM_NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS = NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS;
static const int32_t FCM_NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE = NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE;
static const int32_t FCM_NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE = NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE;
static const uint32_t FCM_NGHTTP2_NO_ERROR = NGHTTP2_NO_ERROR;
static const uint32_t FCM_NGHTTP2_INTERNAL_ERROR = NGHTTP2_INTERNAL_ERROR;
static const uint32_t FCM_NGHTTP2_ENHANCE_YOUR_CALM = NGHTTP2_ENHANCE_YOUR_CALM;
static const uint32_t FCM_NGHTTP2_REFUSED_STREAM = NGHTTP2_REFUSED_STREAM;
static const uint32_t FCM_NGHTTP2_CANCEL = NGHTTP2_CANCEL;
static const uint8_t FCM_NGHTTP2_NV_FLAG_NONE = NGHTTP2_NV_FLAG_NONE;
static const uint8_t FCM_NGHTTP2_NV_FLAG_NO_INDEX = NGHTTP2_NV_FLAG_NO_INDEX;

// A response whose body is read by `read_cb` with `ptr` as its source (NULL: no body).
static inline int fcm_nghttp2_submit_response(nghttp2_session *s, int32_t stream_id, const nghttp2_nv *nva,
        size_t nvlen, nghttp2_data_source_read_callback read_cb, void *ptr) {
    if (!read_cb) return nghttp2_submit_response(s, stream_id, nva, nvlen, NULL);
    nghttp2_data_provider p;
    p.source.ptr = ptr;
    p.read_callback = read_cb;
    return nghttp2_submit_response(s, stream_id, nva, nvlen, &p);
}

// The source pointer a read callback was given.
static inline void *fcm_nghttp2_source_ptr(nghttp2_data_source *src) { return src->ptr; }

static const uint8_t FCM_NGHTTP2_RST_STREAM = NGHTTP2_RST_STREAM;
static const uint8_t FCM_NGHTTP2_SETTINGS = NGHTTP2_SETTINGS;
static const uint32_t FCM_NGHTTP2_PROTOCOL_ERROR = NGHTTP2_PROTOCOL_ERROR;
static const int FCM_NGHTTP2_HCAT_REQUEST = NGHTTP2_HCAT_REQUEST;
static const int FCM_NGHTTP2_ERR_TOO_MANY_CONTINUATIONS = NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
static const int FCM_NGHTTP2_ERR_FLOODED = NGHTTP2_ERR_FLOODED;
