import process from 'node:process';
import { runCli } from './main.ts';

// The `realmgate` command: bin/realmgate.js runs it from a checkout, and packages/cli bundles it
// into the package API clients install. No top-level await: the bundle stays loadable as a
// CommonJS script too.
void runCli(process.argv.slice(2), process.env, process).then((status) => {
  process.exitCode = status;
});
