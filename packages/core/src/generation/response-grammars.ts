import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import type * as XGrammar from '@mlc-ai/web-xgrammar';
import { KilnError, KilnErrorCode } from '../errors.js';
import type { GrammarVocabulary, ResponseFormat } from './response-format.js';

const require = createRequire(import.meta.url);

/**
 * One instance of XGrammar's WebAssembly build. Its bundle is a UMD script that reads
 * `require` and `__filename`, which an ES module does not have, so it runs here as CommonJS
 * would run it, with a console of its own: a schema it cannot compile aborts the call and
 * says why only on the console.
 */
class XGrammarInstance {
  readonly api: typeof XGrammar;
  /** Set once a failed compile may have left this instance's memory in a bad state. */
  spent = false;
  private fatal: string | undefined;

  constructor() {
    const file = require.resolve('@mlc-ai/web-xgrammar');
    const module = { exports: {} };
    const console = {
      log: () => undefined,
      warn: () => undefined,
      error: (...parts: unknown[]) => {
        const line = parts.map(String).join(' ');
        if (line.startsWith('[FATAL]')) this.fatal = line;
      },
    };
    const run = new Function(
      'exports',
      'module',
      'require',
      '__filename',
      '__dirname',
      'console',
      // Its one dynamic import (of node:module) as a require: Function-made code has no
      // module loader to import with under every runner (vitest's, for one).
      readFileSync(file, 'utf8').replace("await import('module')", "require('module')"),
    );
    run(module.exports, module, require, file, dirname(file), console);
    this.api = module.exports as typeof XGrammar;
  }

  /**
   * Runs a compile step; a failure is INVALID_INPUT with XGrammar's reason (no source paths)
   * and marks this instance spent: an aborted WebAssembly call may leave its memory behind.
   */
  async compile<T>(what: () => Promise<T>): Promise<T> {
    this.fatal = undefined;
    try {
      return await what();
    } catch (error) {
      this.spent = true;
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `response_format's schema cannot be used: ${reasonOf(this.fatal, error)}`,
        { details: { param: 'response_format' } },
      );
    }
  }
}

/** XGrammar's "[FATAL] file.cc:885: Check failed: (…) is false: Type should be a string". */
function reasonOf(fatal: string | undefined, error: unknown): string {
  const match =
    fatal && /^\[FATAL\] \S+:\d+: (?:Check failed: \(.*?\) is false: )?(.*)$/.exec(fatal);
  const reason = match ? match[1]! : error instanceof Error ? error.message : String(error);
  return reason.replace(/\. The JSON string is:.*$/, '').slice(0, 300);
}

let shared: XGrammarInstance | undefined;
/** The current instance; a fresh one once a failed compile spent the last. */
function instance(): XGrammarInstance {
  if (!shared || shared.spent) shared = new XGrammarInstance();
  return shared;
}

/**
 * JSON as a model writes it, with whitespace between its elements, but at most this many
 * characters of it in a row: a model cannot pad its answer with blanks forever.
 */
const MAX_WHITESPACE = 16;
/** XGrammar's "no indent": whitespace is the model's choice (within MAX_WHITESPACE). */
const NO_INDENT = -1;
/** Any JSON object, for `json_object`. */
const ANY_OBJECT = '{"type":"object"}';

function schemaOf(format: ResponseFormat): { schema: string; strict: boolean } {
  // Strict: no properties or items the schema does not name, as OpenAI's strict mode.
  return format.type === 'json_object'
    ? { schema: ANY_OBJECT, strict: false }
    : { schema: format.schema, strict: true };
}

/**
 * Whether a response format can be compiled, without a vocabulary (cheap: no token masks);
 * INVALID_INPUT naming XGrammar's reason when it cannot. Run it where a request is first
 * handled off the event loop, so that a bad schema never reaches a step worker.
 */
export async function checkResponseFormat(format: ResponseFormat): Promise<void> {
  const xg = instance();
  const { schema, strict } = schemaOf(format);
  const grammar = await xg.compile(() =>
    xg.api.Grammar.fromJSONSchema(schema, true, NO_INDENT, undefined, strict, MAX_WHITESPACE),
  );
  grammar.dispose();
}

/**
 * One sequence's grammar: which tokens may come next, and the tokens that came. Holds
 * WebAssembly memory until disposed.
 */
export interface TokenConstraint {
  /**
   * The tokens that may come next, as a bitmask (token t allowed when bit t % 32 of word
   * t >> 5 is set); undefined once the grammar has ended at an end token.
   */
  allowed(): Promise<Int32Array | undefined>;
  /** Advances past a chosen token; false (and no change) when the grammar refuses it. */
  accept(token: number): boolean;
  dispose(): void;
}

/**
 * Compiles response formats for one tokenizer into per-token masks, with XGrammar (its JSON
 * schema support and its precomputed token masks). The compiler caches what it compiled by
 * schema text, so requests with the same schema compile it once.
 */
export class ResponseGrammars {
  private forbidden: Int32Array | undefined;
  private compiler:
    { xg: XGrammarInstance; compiler: Promise<XGrammar.GrammarCompiler> } | undefined;

  /**
   * For a vocabulary whose logits are `vocabSize` wide (a model may pad its vocabulary),
   * where `endTokens` end a sequence: once the text is complete, only they may come.
   */
  constructor(
    private readonly vocabulary: GrammarVocabulary,
    private readonly vocabSize: number,
    private readonly endTokens: readonly number[],
  ) {}

  /** Builds the compiler for this vocabulary, and json_object's grammar, ahead of use. */
  async prepare(): Promise<void> {
    (await this.constraint({ type: 'json_object' })).dispose();
  }

  /** A fresh constraint for one sequence; INVALID_INPUT when the format cannot be compiled. */
  async constraint(format: ResponseFormat): Promise<TokenConstraint> {
    if (this.endTokens.length === 0)
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        'response_format needs a model with an end-of-sequence token',
        { details: { param: 'response_format' } },
      );
    const { xg, compiler } = this.current();
    const { schema, strict } = schemaOf(format);
    const compiled = await xg.compile(async () =>
      (await compiler).compileJSONSchema(
        schema,
        true,
        NO_INDENT,
        undefined,
        strict,
        MAX_WHITESPACE,
      ),
    );
    try {
      const matcher = await xg.api.GrammarMatcher.createGrammarMatcher(compiled, [
        ...this.endTokens,
      ]);
      const forbidden = this.controlTokens();
      return {
        allowed: async () => {
          if (matcher.isTerminated()) return undefined;
          const mask = await matcher.getNextTokenBitmask();
          for (let w = 0; w < mask.length; w++) mask[w]! &= ~forbidden[w]!;
          return mask;
        },
        accept: (token) => !matcher.isTerminated() && matcher.acceptToken(token),
        dispose: () => matcher.dispose(),
      };
    } finally {
      compiled.dispose();
    }
  }

  /**
   * Tokens no JSON text needs, as a bitmask: a control character other than a newline
   * (XGrammar lets them into strings, where JSON does not: a tab, say), and bytes that never
   * occur in UTF-8 (C0, C1, F5–FF; XGrammar takes F6 as the lead of a 4-byte character).
   */
  private controlTokens(): Int32Array {
    if (this.forbidden) return this.forbidden;
    const { tokens, encoding } = this.vocabulary;
    const mask = new Int32Array(Math.ceil(Math.max(this.vocabSize, tokens.length) / 32));
    tokens.forEach((token, id) => {
      if (tokenBytes(token, encoding).some(neverInJson)) mask[id >> 5]! |= 1 << (id & 31);
    });
    return (this.forbidden = mask);
  }

  /** The compiler on the current XGrammar instance, made for this vocabulary on first use. */
  private current(): { xg: XGrammarInstance; compiler: Promise<XGrammar.GrammarCompiler> } {
    const xg = instance();
    if (this.compiler?.xg === xg) return this.compiler;
    const { tokens, encoding, prependSpace } = this.vocabulary;
    const compiler = xg.api.TokenizerInfo.createTokenizerInfo(
      [...tokens],
      encoding,
      prependSpace,
      Math.max(this.vocabSize, tokens.length),
      [...this.endTokens],
    ).then((info) => xg.api.GrammarCompiler.createGrammarCompiler(info, true));
    return (this.compiler = { xg, compiler });
  }
}

/** GPT-2's byte alphabet: the character each byte is spelt with, inverted. */
let byteLevelBytes: Map<string, number> | undefined;
function byteOfChar(char: string): number | undefined {
  if (!byteLevelBytes) {
    byteLevelBytes = new Map();
    let extra = 0;
    for (let b = 0; b < 256; b++) {
      const printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      byteLevelBytes.set(String.fromCodePoint(printable ? b : 256 + extra++), b);
    }
  }
  return byteLevelBytes.get(char);
}

function neverInJson(byte: number): boolean {
  return (byte < 0x20 && byte !== 0x0a) || byte === 0xc0 || byte === 0xc1 || byte >= 0xf5;
}

/** The bytes a token stands for, as its vocabulary spells them. */
function tokenBytes(token: string, encoding: GrammarVocabulary['encoding']): number[] {
  if (encoding === 'byte_level') return [...token].map((c) => byteOfChar(c) ?? 0x20);
  if (encoding === 'byte_fallback') {
    const byte = /^<0x([0-9A-Fa-f]{2})>$/.exec(token);
    if (byte) return [parseInt(byte[1]!, 16)];
  }
  return [...Buffer.from(token, 'utf8')];
}
