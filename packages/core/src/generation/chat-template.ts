import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type * as Jinja from '@huggingface/jinja';
import { KilnError, KilnErrorCode } from '../errors.js';
import { lazyModule } from '../lazy-module.js';

// Loaded with the first chat template, not when core is imported (core loads in every thread).
const jinja = lazyModule<typeof Jinja>('@huggingface/jinja');

/** Where Hugging Face keeps a chat template: `chat_template` in the tokenizer's settings… */
export const CHAT_TEMPLATE_CONFIG_FILE = 'tokenizer_config.json';
/** …or, in newer folders, a file of its own. */
export const CHAT_TEMPLATE_FILE = 'chat_template.jinja';

/** One message of a chat, as OpenAI and Hugging Face templates read it. */
export type ChatMessage = Readonly<Record<string, unknown>> & { readonly role: string };

export interface ChatRenderOptions {
  /** OpenAI's `tools`, passed to the template as `tools`. */
  readonly tools?: readonly unknown[];
  /** End with the start of the assistant's turn; default true. */
  readonly addGenerationPrompt?: boolean;
}

/**
 * A model's chat template (Jinja, rendered by @huggingface/jinja as transformers.js does),
 * with the special tokens its settings name (`bos_token`, `eos_token`, …) in scope. A
 * template's `raise_exception` refuses the messages with INVALID_INPUT.
 */
export class ChatTemplate {
  private readonly templates: ReadonlyMap<string, Jinja.Template>;

  private constructor(
    private readonly sources: ReadonlyMap<string, string>,
    private readonly specialTokens: Readonly<Record<string, string>>,
  ) {
    const templates = new Map<string, Jinja.Template>();
    for (const [name, source] of sources) {
      try {
        templates.set(name, new (jinja().Template)(source));
      } catch (error) {
        throw new KilnError(
          KilnErrorCode.InvalidConfig,
          `the chat template${name === 'default' ? '' : ` ${name}`} does not parse: ${message(error)}`,
          { cause: error },
        );
      }
    }
    this.templates = templates;
  }

  /**
   * The template of a parsed `tokenizer_config.json` (`chat_template`: one string, or a list
   * of `{name, template}` where `default` is the one used and `tool_use` the one for tools),
   * or `source` when given (a `chat_template.jinja`); undefined when there is none.
   */
  static fromTokenizerConfig(
    config: Readonly<Record<string, unknown>>,
    source?: string,
  ): ChatTemplate | undefined {
    const sources = new Map<string, string>();
    const raw = source ?? config.chat_template;
    if (typeof raw === 'string') sources.set('default', raw);
    else if (Array.isArray(raw))
      for (const entry of raw as unknown[]) {
        const { name, template } = (entry ?? {}) as { name?: unknown; template?: unknown };
        if (typeof name === 'string' && typeof template === 'string') sources.set(name, template);
      }
    else if (raw !== undefined && raw !== null)
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${CHAT_TEMPLATE_CONFIG_FILE}: chat_template must be a string or a list of {name, template}`,
      );
    if (sources.size === 0) return undefined;
    if (!sources.has('default'))
      throw new KilnError(
        KilnErrorCode.InvalidConfig,
        `${CHAT_TEMPLATE_CONFIG_FILE}: chat_template lists no template named default`,
      );
    const specialTokens: Record<string, string> = {};
    for (const key of ['bos_token', 'eos_token', 'unk_token', 'pad_token']) {
      const text = tokenText(config[key]);
      if (text !== undefined) specialTokens[key] = text;
    }
    return new ChatTemplate(sources, specialTokens);
  }

  /** A model folder's chat template (`chat_template.jinja` first); undefined when none. */
  static async fromFolder(dir: string): Promise<ChatTemplate | undefined> {
    const source = await readFile(join(dir, CHAT_TEMPLATE_FILE), 'utf8').catch(() => undefined);
    const text = await readFile(join(dir, CHAT_TEMPLATE_CONFIG_FILE), 'utf8').catch(
      () => undefined,
    );
    let config: unknown = {};
    if (text !== undefined)
      try {
        config = JSON.parse(text);
      } catch (error) {
        throw new KilnError(
          KilnErrorCode.InvalidConfig,
          `${CHAT_TEMPLATE_CONFIG_FILE} is not valid JSON`,
          { cause: error },
        );
      }
    if (typeof config !== 'object' || config === null || Array.isArray(config)) config = {};
    return ChatTemplate.fromTokenizerConfig(config as Record<string, unknown>, source);
  }

  /** The bos and eos texts the template sees, when the settings name them. */
  get bosToken(): string | undefined {
    return this.specialTokens.bos_token;
  }

  get eosToken(): string | undefined {
    return this.specialTokens.eos_token;
  }

  /** Whether a template reads `tools` (else a request's tools have nowhere to go). */
  usesTools(): boolean {
    return [...this.sources.values()].some((source) => /\btools\b/.test(source));
  }

  /** The prompt the model is to continue: the messages as its template writes them. */
  render(messages: readonly ChatMessage[], options: ChatRenderOptions = {}): string {
    const tools =
      options.tools !== undefined && options.tools.length > 0 ? options.tools : undefined;
    if (tools && !this.usesTools())
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        "the model's chat template has no place for tools: leave tools out",
      );
    const template = (tools && this.templates.get('tool_use')) || this.templates.get('default')!;
    try {
      return template.render({
        ...this.specialTokens,
        messages,
        add_generation_prompt: options.addGenerationPrompt ?? true,
        ...(tools ? { tools } : {}),
      });
    } catch (error) {
      throw new KilnError(
        KilnErrorCode.InvalidInput,
        `the model's chat template refused the messages: ${message(error)}`,
        { cause: error },
      );
    }
  }
}

function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (typeof value === 'object' && value !== null && 'content' in value) {
    const content = (value as { content?: unknown }).content;
    if (typeof content === 'string') return content;
  }
  return undefined;
}

const message = (error: unknown) => (error instanceof Error ? error.message : String(error));
