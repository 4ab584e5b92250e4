import { describe, expect, it } from 'vitest';
import { checkHostAndOrigin, hostPolicy } from './host-origin.js';

const refused = expect.objectContaining({ code: 'FORBIDDEN' });

describe('checkHostAndOrigin', () => {
  const loopback = hostPolicy('127.0.0.1', [], []);

  it('accepts loopback names, with or without a port', () => {
    for (const host of ['127.0.0.1:8081', 'localhost', 'LOCALHOST:1', '[::1]:8081', '::1'])
      expect(() => checkHostAndOrigin(loopback, host, undefined)).not.toThrow();
  });

  it('refuses a foreign or missing Host (DNS rebinding)', () => {
    for (const host of ['evil.example:8081', 'evil.example', '127.0.0.1.evil.example', undefined])
      expect(() => checkHostAndOrigin(loopback, host, undefined)).toThrow(refused);
  });

  it('refuses cross-origin requests and accepts same-origin ones', () => {
    expect(() => checkHostAndOrigin(loopback, '127.0.0.1:8081', 'http://evil.example')).toThrow(
      refused,
    );
    expect(() => checkHostAndOrigin(loopback, '127.0.0.1:8081', 'null')).toThrow(refused);
    expect(() => checkHostAndOrigin(loopback, '127.0.0.1:8081', 'http://127.0.0.1:9999')).toThrow(
      refused,
    );
    expect(() =>
      checkHostAndOrigin(loopback, '127.0.0.1:8081', 'http://127.0.0.1:8081'),
    ).not.toThrow();
  });

  it('accepts configured hosts and origins only', () => {
    const policy = hostPolicy('0.0.0.0', ['kiln.internal'], ['https://app.example']);
    expect(() => checkHostAndOrigin(policy, 'kiln.internal:8080', undefined)).not.toThrow();
    expect(() => checkHostAndOrigin(policy, 'localhost:8080', undefined)).toThrow(refused);
    expect(() => checkHostAndOrigin(policy, 'kiln.internal', 'https://app.example')).not.toThrow();
    expect(() => checkHostAndOrigin(policy, 'kiln.internal', 'https://other.example')).toThrow(
      refused,
    );
  });

  it('takes any Host on a wildcard bind, still refusing foreign origins', () => {
    const wide = hostPolicy('0.0.0.0', [], []);
    expect(() => checkHostAndOrigin(wide, 'model.default.svc:8080', undefined)).not.toThrow();
    expect(() => checkHostAndOrigin(wide, 'model.default.svc:8080', 'http://evil.example')).toThrow(
      refused,
    );
  });
});
