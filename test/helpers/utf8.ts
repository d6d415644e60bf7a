/** Bytes that are not UTF-8, for the fuzzers that damage what they send (a request body, a Redis message). */

/** Byte sequences no UTF-8 decoder may accept: stray continuations, overlongs, surrogates, truncations, past U+10FFFF. */
export const INVALID_UTF8: readonly (readonly number[])[] = [
  [0xff],
  [0xfe],
  [0x80],
  [0xc0, 0xaf],
  [0xe0, 0x80, 0xaf],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0xe2, 0x82],
  [0xf0, 0x9f, 0x98],
  [0xc3],
];
