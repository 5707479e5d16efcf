#!/usr/bin/env node
// The CLI is TypeScript like the rest of realmgate; tsx (a runtime dependency) loads it as is,
// so there is no build step to forget.
import process from 'node:process';
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../src/cli/main.ts');
process.exitCode = await runCli(process.argv.slice(2), process.env, process);
