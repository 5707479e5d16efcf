import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/config/config.ts';
import { tracesUrlOf } from '../../../src/tracing/tracing.ts';

const demo = { REALMGATE_DEMO: 'true' };

describe('tracing configuration', () => {
  it('is off by default: no endpoint, every request sampled once on, service realmgate', () => {
    const config = loadConfig(demo);
    expect(tracesUrlOf(config)).toBeUndefined();
    expect(config.OTEL_SERVICE_NAME).toBe('realmgate');
    expect(config.OTEL_TRACES_SAMPLER_ARG).toBe(1);
  });

  it("takes the traces endpoint as is, else the base endpoint with OpenTelemetry's /v1/traces", () => {
    const base = 'http://collector:4318';
    expect(tracesUrlOf(loadConfig({ ...demo, OTEL_EXPORTER_OTLP_ENDPOINT: `${base}/` }))).toBe(
      `${base}/v1/traces`,
    );
    expect(
      tracesUrlOf(
        loadConfig({
          ...demo,
          OTEL_EXPORTER_OTLP_ENDPOINT: base,
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/spans',
        }),
      ),
    ).toBe('https://traces.example/otlp/spans');
  });

  it('reads the export headers as name=value pairs, values percent-decoded', () => {
    const config = loadConfig({
      ...demo,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=abc123, authorization=Basic%20dTpw,x-empty=',
    });
    expect(config.OTEL_EXPORTER_OTLP_HEADERS).toEqual({
      'x-api-key': 'abc123',
      authorization: 'Basic dTpw',
      'x-empty': '',
    });
  });

  it('refuses malformed settings, naming header entries by position and never their value', () => {
    let problems: string[] = [];
    try {
      loadConfig({
        ...demo,
        OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
        OTEL_EXPORTER_OTLP_HEADERS: 'x-api-key=fine,secret-token-value,bad name=x,k=%zz',
        OTEL_TRACES_SAMPLER_ARG: '1.5',
      });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([
      expect.stringMatching(/^OTEL_EXPORTER_OTLP_ENDPOINT: /),
      'OTEL_EXPORTER_OTLP_HEADERS: entry 2 is not name=value',
      'OTEL_EXPORTER_OTLP_HEADERS: entry 3 is not name=value',
      'OTEL_EXPORTER_OTLP_HEADERS: entry 4 is not name=value',
      expect.stringMatching(/^OTEL_TRACES_SAMPLER_ARG: /),
    ]);
    expect(problems.join('\n')).not.toMatch(/secret-token|fine|%zz/);
  });
});
