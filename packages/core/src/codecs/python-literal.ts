import { malformed } from './limits.js';

/**
 * The Python literals an .npy header may hold. numpy writes the header with `repr` and reads
 * it back with `ast.literal_eval`; this parser accepts the same small subset without
 * evaluating anything.
 */
export type PyLiteral =
  | string
  | number
  | boolean
  | null
  | { readonly kind: 'tuple' | 'list'; readonly items: readonly PyLiteral[] }
  | { readonly kind: 'dict'; readonly entries: ReadonlyMap<string, PyLiteral> };

const MAX_DEPTH = 16;
const FORMAT = 'npy';

const SIMPLE_ESCAPES: Readonly<Record<string, string>> = {
  '\\': '\\',
  "'": "'",
  '"': '"',
  n: '\n',
  r: '\r',
  t: '\t',
  '0': '\0',
};

/** Parses one literal that fills `text` apart from surrounding whitespace. */
export function parsePyLiteral(text: string): PyLiteral {
  const parser = new Parser(text);
  const value = parser.value(0);
  parser.skipSpace();
  if (!parser.atEnd()) throw parser.error('unexpected text after the header dictionary');
  return value;
}

class Parser {
  private pos = 0;
  constructor(private readonly text: string) {}

  atEnd(): boolean {
    return this.pos >= this.text.length;
  }

  error(message: string) {
    return malformed(FORMAT, `header ${message} at character ${this.pos}`);
  }

  skipSpace(): void {
    while (!this.atEnd() && ' \t\r\n'.includes(this.text[this.pos]!)) this.pos++;
  }

  value(depth: number): PyLiteral {
    if (depth > MAX_DEPTH) throw this.error('nests too deeply');
    this.skipSpace();
    const char = this.text[this.pos];
    if (char === undefined) throw this.error('ends early');
    if (char === '{') return this.dict(depth);
    if (char === '(') return this.sequence(depth, 'tuple', ')');
    if (char === '[') return this.sequence(depth, 'list', ']');
    if (char === "'" || char === '"') return this.string(char);
    if (char === '-' || char === '+' || (char >= '0' && char <= '9')) return this.integer();
    for (const [word, value] of [
      ['True', true],
      ['False', false],
      ['None', null],
    ] as const) {
      if (this.text.startsWith(word, this.pos)) {
        this.pos += word.length;
        return value;
      }
    }
    throw this.error(`has unexpected ${JSON.stringify(char)}`);
  }

  private expect(char: string): void {
    this.skipSpace();
    if (this.text[this.pos] !== char) throw this.error(`expected ${JSON.stringify(char)}`);
    this.pos++;
  }

  /**
   * After an item: consumes `close` (true, sequence over) or a comma (false, more to come),
   * accepting Python's trailing comma. `trailing` tells whether a comma preceded `close`.
   */
  private next(close: string): { done: boolean; trailing: boolean } {
    this.skipSpace();
    if (this.text[this.pos] === close) {
      this.pos++;
      return { done: true, trailing: false };
    }
    this.expect(',');
    this.skipSpace();
    if (this.text[this.pos] === close) {
      this.pos++;
      return { done: true, trailing: true };
    }
    return { done: false, trailing: true };
  }

  private dict(depth: number): PyLiteral {
    this.pos++;
    const entries = new Map<string, PyLiteral>();
    this.skipSpace();
    if (this.text[this.pos] === '}') {
      this.pos++;
      return { kind: 'dict', entries };
    }
    for (;;) {
      const key = this.value(depth + 1);
      if (typeof key !== 'string') throw this.error('has a dictionary key that is not a string');
      if (entries.has(key)) throw this.error(`repeats the key ${JSON.stringify(key)}`);
      this.expect(':');
      entries.set(key, this.value(depth + 1));
      if (this.next('}').done) return { kind: 'dict', entries };
    }
  }

  private sequence(depth: number, kind: 'tuple' | 'list', close: string): PyLiteral {
    this.pos++;
    const items: PyLiteral[] = [];
    this.skipSpace();
    if (this.text[this.pos] === close) {
      this.pos++;
      return { kind, items };
    }
    for (;;) {
      items.push(this.value(depth + 1));
      const { done, trailing } = this.next(close);
      if (!done) continue;
      // `(5)` is just 5 in Python; only a trailing comma makes a one-element tuple.
      if (kind === 'tuple' && items.length === 1 && !trailing) return items[0]!;
      return { kind, items };
    }
  }

  private string(quote: string): string {
    this.pos++;
    let out = '';
    for (;;) {
      const char = this.text[this.pos++];
      if (char === undefined || char === '\n') throw this.error('has an unterminated string');
      if (char === quote) return out;
      if (char !== '\\') {
        out += char;
        continue;
      }
      const escape = this.text[this.pos++];
      if (escape === undefined) throw this.error('has an unterminated string');
      const simple = SIMPLE_ESCAPES[escape];
      if (simple !== undefined) {
        out += simple;
      } else if (escape === 'x') {
        const hex = this.text.slice(this.pos, this.pos + 2);
        if (!/^[0-9a-fA-F]{2}$/.test(hex)) throw this.error('has a bad \\x escape');
        out += String.fromCharCode(parseInt(hex, 16));
        this.pos += 2;
      } else {
        throw this.error(`has an unsupported escape \\${escape}`);
      }
    }
  }

  private integer(): number {
    const match = /^[+-]?\d{1,30}L?/.exec(this.text.slice(this.pos, this.pos + 32));
    if (!match) throw this.error('has a malformed number');
    const digits = match[0].replace('L', '');
    const value = Number(digits);
    if (!Number.isSafeInteger(value)) throw this.error(`has an integer ${digits} too large`);
    this.pos += match[0].length;
    const next = this.text[this.pos];
    if (next !== undefined && /[\w.]/.test(next)) throw this.error('has a malformed number');
    return value;
  }
}
