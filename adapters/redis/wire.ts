/**
 * The Redis bus's wire: the format every bus shares (lib/wire.ts, behind the adapters' door), with the
 * first release's legacy copies that only Redis ever carried.
 */
export {
  LEGACY_COPY_MARK,
  LEGACY_WIRE_VERSION,
  MAX_MESSAGE_BYTES,
  MAX_TRACESTATE_LENGTH,
  tooLarge,
  Wire,
  WIRE_VERSION,
} from '../../lib/internal.ts';
export type { Decoded, DropReason } from '../../lib/internal.ts';
