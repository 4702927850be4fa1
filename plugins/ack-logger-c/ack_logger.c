// ACK logger in C (Core QUIC paper, section VI-A): the same plugin as
// plugins/ack-logger, written against wit-bindgen's C bindings of the
// `plugin` world to show that the ABI does not depend on Rust.
//
// It observes ACK processing (AFTER anchor of process-frame, types 0x02 and
// 0x03) and logs the largest acknowledged packet, the ACK delay and the
// number of ranges through the host's structured log, as records of one
// declared shape (ABI 0.2.2). It changes nothing.
//
// Ownership follows wit-bindgen's C conventions: a routine owns its
// arguments and frees them; what it returns is freed by the generated
// post-return function, so it must come from malloc; arguments of host calls
// stay the caller's.

#include <stdlib.h>
#include <string.h>

#include "corequic_ids.h"
#include "plugin.h"
#include "plugin_abi_version.h"

// ACK and ACK_ECN, the frame types the plugin observes.
static const uint64_t ACK = 0x02;
static const uint64_t ACK_ECN = 0x03;

typedef exports_core_quic_plugin_routines_error_t error_t;

// A heap copy of `n` elements of `size` bytes, for returned lists.
static void *heap_copy(const void *src, size_t n, size_t size) {
  void *dst = malloc(n * size);
  if (dst == NULL) {
    abort();
  }
  memcpy(dst, src, n * size);
  return dst;
}

void exports_core_quic_plugin_routines_manifest(
    exports_core_quic_plugin_routines_plugin_manifest_t *ret) {
  static const core_quic_plugin_types_binding_t bindings[] = {
      {COREQUIC_ROUTINE_PROCESS_FRAME, CORE_QUIC_PLUGIN_TYPES_ANCHOR_AFTER,
       ACK},
      {COREQUIC_ROUTINE_PROCESS_FRAME, CORE_QUIC_PLUGIN_TYPES_ANCHOR_AFTER,
       ACK_ECN},
  };
  static const core_quic_plugin_types_permission_id_t permissions[] = {
      COREQUIC_PERMISSION_LOGGING,
  };
  memset(ret, 0, sizeof(*ret));
  plugin_string_dup(&ret->name, "ack-logger-c");
  plugin_string_dup(&ret->version, "0.2.0");
  plugin_string_dup(&ret->abi_version, COREQUIC_ABI_VERSION);
  ret->bindings.len = sizeof(bindings) / sizeof(bindings[0]);
  ret->bindings.ptr =
      heap_copy(bindings, ret->bindings.len, sizeof(bindings[0]));
  ret->permissions.len = sizeof(permissions) / sizeof(permissions[0]);
  ret->permissions.ptr =
      heap_copy(permissions, ret->permissions.len, sizeof(permissions[0]));
}

// The host reported this plugin's log budget spent on this connection.
static bool budget_spent = false;

bool exports_core_quic_plugin_routines_init(error_t *err) {
  (void)err;
  // No negotiation: observe from the start.
  core_quic_plugin_host_enable();
  return true;
}

// The record of each ACK, declared once per connection (ABI 0.2.2): each
// record then passes only its four values to the host. `shape` is the
// host's handle plus one; 0 until declared.
static uint32_t shape = 0;

// Declare the record's shape on this connection, if not yet done.
static bool declare_shape(error_t *err) {
  if (shape != 0) {
    return true;
  }
  core_quic_plugin_host_tuple2_string_log_value_kind_t keys[] = {
      {{0}, CORE_QUIC_PLUGIN_TYPES_LOG_VALUE_KIND_U64},
      {{0}, CORE_QUIC_PLUGIN_TYPES_LOG_VALUE_KIND_DURATION},
      {{0}, CORE_QUIC_PLUGIN_TYPES_LOG_VALUE_KIND_U64},
      {{0}, CORE_QUIC_PLUGIN_TYPES_LOG_VALUE_KIND_U64},
  };
  plugin_string_set(&keys[0].f0, "largest-acknowledged");
  plugin_string_set(&keys[1].f0, "ack-delay");
  plugin_string_set(&keys[2].f0, "ranges");
  plugin_string_set(&keys[3].f0, "packet-number");
  core_quic_plugin_host_list_tuple2_string_log_value_kind_t list = {
      keys, sizeof(keys) / sizeof(keys[0])};
  plugin_string_t message;
  plugin_string_set(&message, "ack processed");
  core_quic_plugin_host_log_shape_t handle = 0;
  if (!core_quic_plugin_host_declare_log_shape(
          CORE_QUIC_PLUGIN_TYPES_LOG_LEVEL_INFO, &message, &list, &handle,
          err)) {
    return false;
  }
  shape = handle + 1;
  return true;
}

// The frame as data: ACK is [largest-acknowledged, ack-delay, ranges…],
// ACK_ECN [largest-acknowledged, ack-delay, ect0, ect1, ce, ranges…], each
// range two values (specification chapter 9).
bool exports_core_quic_plugin_routines_process_frame(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_frame_t *frame,
    exports_core_quic_plugin_routines_rx_context_t *ctx, error_t *err) {
  (void)anchor;
  bool ok = true;
  size_t fixed = frame->frame_type == ACK_ECN ? 5 : 2;
  const plugin_list_u64_t *v = &frame->values;
  bool is_ack = frame->frame_type == ACK || frame->frame_type == ACK_ECN;
  if (is_ack && v->len >= fixed && (v->len - fixed) % 2 == 0 &&
      !budget_spent) {
    uint64_t values[] = {v->ptr[0], v->ptr[1], (v->len - fixed) / 2,
                         ctx->packet_number};
    plugin_list_u64_t list = {values, sizeof(values) / sizeof(values[0])};
    // A refused log call fails the routine with the host's error, as the
    // Rust plugin's `?` does. Once the host reports the log budget spent,
    // records are no longer built (the host would drop them).
    uint64_t left = 0;
    ok = declare_shape(err) &&
         core_quic_plugin_host_log_shaped(shape - 1, &list, &left, err);
    budget_spent = ok && left == 0;
  }
  exports_core_quic_plugin_routines_frame_free(frame);
  return ok;
}

// The routines below are not bound in the manifest, so the host never calls
// them (CQ-ROUTINE-2). The world exports them all; each fails with
// `unsupported` and frees what it owns.

static bool not_bound(error_t *err) {
  err->kind = COREQUIC_ERROR_UNSUPPORTED;
  err->value = 0;
  plugin_string_dup(&err->message, "routine not bound by ack-logger-c");
  return false;
}

bool exports_core_quic_plugin_routines_write_transport_parameter(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_tp_id_t id,
    exports_core_quic_plugin_routines_borrow_out_buf_t out, error_t *err) {
  (void)anchor, (void)id, (void)out;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_decode_transport_parameter(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_tp_id_t id,
    exports_core_quic_plugin_routines_borrow_in_buf_t value, error_t *err) {
  (void)anchor, (void)id, (void)value;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_should_send_frame(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_frame_type_t frame_type,
    exports_core_quic_plugin_routines_send_context_t *ctx, bool *ret,
    error_t *err) {
  (void)anchor, (void)frame_type, (void)ctx, (void)ret;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_write_frame(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_frame_type_t frame_type,
    exports_core_quic_plugin_routines_send_context_t *ctx,
    exports_core_quic_plugin_routines_borrow_out_buf_t out,
    plugin_option_u64_t *ret, error_t *err) {
  (void)anchor, (void)frame_type, (void)ctx, (void)out, (void)ret;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_on_frame_reserved(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_ext_frame_t *frame,
    exports_core_quic_plugin_routines_send_context_t *ctx, error_t *err) {
  (void)anchor, (void)frame, (void)ctx;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_notify_frame(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_ext_frame_t *frame,
    exports_core_quic_plugin_routines_frame_outcome_t outcome, error_t *err) {
  (void)anchor, (void)frame, (void)outcome;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_parse_frame(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_frame_type_t frame_type,
    exports_core_quic_plugin_routines_borrow_in_buf_t payload,
    exports_core_quic_plugin_routines_parsed_frame_t *ret, error_t *err) {
  (void)anchor, (void)frame_type, (void)payload, (void)ret;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_log_frame(
    exports_core_quic_plugin_routines_anchor_t anchor,
    exports_core_quic_plugin_routines_frame_t *frame, plugin_string_t *ret,
    error_t *err) {
  (void)anchor, (void)ret;
  exports_core_quic_plugin_routines_frame_free(frame);
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_on_plugin_timeout(
    exports_core_quic_plugin_routines_timer_id_t id,
    exports_core_quic_plugin_routines_instant_t now, error_t *err) {
  (void)id, (void)now;
  return not_bound(err);
}

bool exports_core_quic_plugin_routines_plugin_control(
    exports_core_quic_plugin_routines_control_id_t id,
    exports_core_quic_plugin_routines_list_plugin_val_t *args,
    exports_core_quic_plugin_routines_list_plugin_val_t *ret, error_t *err) {
  (void)id, (void)ret;
  exports_core_quic_plugin_routines_list_plugin_val_free(args);
  err->kind = COREQUIC_ERROR_NOT_FOUND;
  err->value = 0;
  plugin_string_dup(&err->message, "unknown plugin-control id");
  return false;
}

bool exports_core_quic_plugin_routines_call_routine(
    exports_core_quic_plugin_routines_routine_id_t routine,
    exports_core_quic_plugin_routines_anchor_t anchor, uint64_t param,
    exports_core_quic_plugin_routines_list_plugin_val_t *args,
    exports_core_quic_plugin_routines_list_plugin_val_t *ret, error_t *err) {
  (void)routine, (void)anchor, (void)param, (void)ret;
  exports_core_quic_plugin_routines_list_plugin_val_free(args);
  return not_bound(err);
}
