/** The bearer credentials every HTTP suite sends: the sample apps', the examples' and the Nest apps'. */

/** `Authorization: Bearer <token>` as a header record; none at all for `undefined` (an anonymous caller). */
export function bearer(token: string | undefined): Record<string, string> {
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}
