/**
 * What a model may add to its answer's HTTP headers. Translators (a Python handler's
 * `Output.add_property`, say) name headers freely; the server writes only those that are valid
 * HTTP and leaves the ones that frame or route the message to itself. An invalid one is
 * dropped rather than failing the answer (Node would throw on it).
 */

/** Headers the server writes itself: those that frame or route the message, and the type. */
const SERVER_HEADERS = new Set([
  'connection',
  'content-length',
  'content-type',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const MAX_VALUE_LENGTH = 8192;

/** Whether a value may be sent in a header: no control characters (CR, LF, NUL…), not huge. */
export function isSendableHeaderValue(value: string): boolean {
  return value.length <= MAX_VALUE_LENGTH && HEADER_VALUE.test(value);
}

/** The headers of a model's answer that may be sent; undefined when none may. */
export function sendableHeaders(
  headers: Readonly<Record<string, string>>,
): Record<string, string> | undefined {
  let sendable: Record<string, string> | undefined;
  for (const [name, value] of Object.entries(headers)) {
    if (SERVER_HEADERS.has(name.toLowerCase()) || !HEADER_NAME.test(name)) continue;
    const text = String(value);
    if (isSendableHeaderValue(text)) (sendable ??= {})[name] = text;
  }
  return sendable;
}
