/**
 * Why a message (or one entry of a batch) was not stored in silver. Every code is
 * snake_case and lands in bronze `device_messages.error`; docs/ingest.md lists them.
 */
export type RejectionReason =
  | 'unknown_topic'
  | 'unknown_message_type'
  | 'payload_too_large'
  | 'invalid_utf8'
  | 'invalid_json'
  | 'invalid_payload'
  | 'missing_field'
  | 'invalid_field_type'
  | 'invalid_field_value'
  | 'value_out_of_range'
  | 'invalid_coordinates'
  | 'invalid_timestamp'
  | 'future_timestamp'
  | 'stale_timestamp'
  | 'empty_batch'
  | 'unknown_device'
  | 'device_disabled'
  | 'storage_error';

export type StepResult<T> = { ok: true; value: T } | { ok: false; reason: RejectionReason; detail: string };

export function ok<T>(value: T): StepResult<T> {
  return { ok: true, value };
}

export function rejected<T = never>(reason: RejectionReason, detail: string): StepResult<T> {
  return { ok: false, reason, detail };
}
