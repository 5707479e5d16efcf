import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { IPod } from 'kubernetes-models/v1/Pod';
import { describe, expect, it } from 'vitest';
import { ofKind, render } from '../helpers/helm-chart.ts';
import { testEnv } from '../helpers/test-env.ts';

/*
 * The chart's `helm test` pod runs a Node script in the gateway's image against the public
 * Service. No cluster runs here, so the script the chart renders is run as it is, with the same
 * Node, against the real gateway of the test stack (Keycloak, PostgreSQL and Redis behind it).
 */

const run = promisify(execFile);

/** The rendered test pod's command and its BASE, pointed at `base` instead of the Service. */
function testHook(): string[] {
  const [pod] = ofKind<IPod>(render([]), 'Pod');
  const container = pod!.spec!.containers[0]!;
  expect(container.command![0]).toBe('node');
  expect(container.env!.map((v) => v.name)).toEqual(['BASE']);
  return container.command!.slice(1);
}

describe("the chart's helm test", () => {
  it('passes against a ready gateway: /readyz and an envelope refusal', async () => {
    const { stdout } = await run(process.execPath, testHook(), {
      env: { ...process.env, BASE: testEnv().publicUrl },
    });
    expect(stdout).toMatch(/^\/readyz: 200 000-00000 /m);
    expect(stdout).toMatch(/^\/api\/platform\/organizations: 401 401-00002 /m);
  });

  it('fails where the answers are not the gateway’s', async () => {
    // A prefix the gateway does not serve: its 404 envelope is not what the hook asks for.
    const failed = run(process.execPath, testHook(), {
      env: { ...process.env, BASE: `${testEnv().publicUrl}/elsewhere` },
    });
    await expect(failed).rejects.toMatchObject({ code: 1 });
    await expect(failed).rejects.toThrow(/\/readyz: 404/);
  });
});
