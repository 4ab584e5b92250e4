import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KilnErrorCode } from '../errors.js';
import { ChatTemplate } from './chat-template.js';

/** Zephyr's template, as its tokenizer_config.json has it. */
const ZEPHYR =
  "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

/** Llama 2's, with its raise_exception for turns out of order. */
const LLAMA2 =
  "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}";

/** A ChatML template that lists tools in the system turn, as Qwen's do. */
const CHATML_TOOLS =
  '{% if tools %}<|im_start|>system\nTools:{% for tool in tools %} {{ tool.function.name }}{% endfor %}<|im_end|>\n{% endif %}{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}';

describe('ChatTemplate', () => {
  it('renders a chat with the special tokens of tokenizer_config.json and the generation prompt', () => {
    const template = ChatTemplate.fromTokenizerConfig({
      chat_template: ZEPHYR,
      eos_token: '</s>',
    })!;
    const prompt = template.render([
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: 'Hi \u{1F642}' },
    ]);
    expect(prompt).toBe('<|system|>\nBe brief.</s>\n<|user|>\nHi \u{1F642}</s>\n<|assistant|>\n');
    expect(template.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false })).toBe(
      '<|user|>\nHi</s>\n',
    );
  });

  it('reads bos and eos tokens given as added-token objects', () => {
    const template = ChatTemplate.fromTokenizerConfig({
      chat_template: LLAMA2,
      bos_token: { content: '<s>', lstrip: false, normalized: false, special: true },
      eos_token: { content: '</s>', special: true },
    })!;
    expect([template.bosToken, template.eosToken]).toEqual(['<s>', '</s>']);
    expect(
      template.render([
        { role: 'system', content: 'S' },
        { role: 'user', content: ' Q ' },
        { role: 'assistant', content: 'A' },
        { role: 'user', content: 'Q2' },
      ]),
    ).toBe('<s>[INST] <<SYS>>\nS\n<</SYS>>\n\n Q [/INST] A </s><s>[INST] Q2 [/INST]');
  });

  it("refuses messages the template's raise_exception refuses, as INVALID_INPUT", () => {
    const template = ChatTemplate.fromTokenizerConfig({ chat_template: LLAMA2 })!;
    expect(() => template.render([{ role: 'assistant', content: 'A' }])).toThrow(
      expect.objectContaining({
        code: KilnErrorCode.InvalidInput,
        message: expect.stringMatching(/roles must alternate/),
      }),
    );
  });

  it('passes tools to a template that reads them, and refuses them to one that does not', () => {
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: {} } }];
    const chatml = ChatTemplate.fromTokenizerConfig({ chat_template: CHATML_TOOLS })!;
    expect(chatml.usesTools()).toBe(true);
    expect(chatml.render([{ role: 'user', content: 'Rain?' }], { tools })).toBe(
      '<|im_start|>system\nTools: get_weather<|im_end|>\n<|im_start|>user\nRain?<|im_end|>\n<|im_start|>assistant\n',
    );
    expect(chatml.render([{ role: 'user', content: 'Rain?' }])).not.toContain('Tools');
    const zephyr = ChatTemplate.fromTokenizerConfig({ chat_template: ZEPHYR, eos_token: '' })!;
    expect(zephyr.usesTools()).toBe(false);
    expect(() => zephyr.render([{ role: 'user', content: 'x' }], { tools })).toThrow(
      expect.objectContaining({ code: KilnErrorCode.InvalidInput }),
    );
  });

  it('takes the default of named templates, and tool_use when tools are given', () => {
    const template = ChatTemplate.fromTokenizerConfig({
      chat_template: [
        { name: 'default', template: 'plain:{{ messages[0].content }}' },
        { name: 'tool_use', template: 'tools:{{ tools | length }}:{{ messages[0].content }}' },
      ],
    })!;
    const messages = [{ role: 'user', content: 'x' }];
    expect(template.render(messages)).toBe('plain:x');
    expect(template.render(messages, { tools: [{}, {}] })).toBe('tools:2:x');
  });

  it('is absent without chat_template, and refuses one that does not parse', () => {
    expect(ChatTemplate.fromTokenizerConfig({ eos_token: '</s>' })).toBeUndefined();
    expect(() => ChatTemplate.fromTokenizerConfig({ chat_template: '{% for %}' })).toThrow(
      expect.objectContaining({ code: KilnErrorCode.InvalidConfig }),
    );
  });

  it('reads a folder, chat_template.jinja before tokenizer_config.json', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kiln-chat-template-'));
    try {
      expect(await ChatTemplate.fromFolder(dir)).toBeUndefined();
      await writeFile(
        join(dir, 'tokenizer_config.json'),
        JSON.stringify({ chat_template: 'config {{ bos_token }}', bos_token: '<s>' }),
      );
      expect((await ChatTemplate.fromFolder(dir))!.render([])).toBe('config <s>');
      await writeFile(join(dir, 'chat_template.jinja'), 'file {{ bos_token }}');
      expect((await ChatTemplate.fromFolder(dir))!.render([])).toBe('file <s>');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
