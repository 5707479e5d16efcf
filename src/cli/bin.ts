import process from 'node:process';
import { closableOutput } from './closable-output.ts';
import { exitCodes } from './errors.ts';
import { runCli } from './main.ts';

// The `realmgate` command: bin/realmgate.js runs it from a checkout, and packages/cli bundles it
// into the package API clients install. No top-level await: the bundle stays loadable as a
// CommonJS script too.

// A reader that stopped reading (`| head`) may be found gone only after the last write, once
// the command is done: the status is set then too.
const stdout = closableOutput(process.stdout, () => {
  process.exitCode = exitCodes.outputClosed;
});
// Nothing is left to say to a stderr nobody reads.
const stderr = closableOutput(process.stderr);
const io = {
  stdin: process.stdin,
  stdout,
  stderr: { write: (text: string) => !stderr.closed && stderr.write(text) },
};
void runCli(process.argv.slice(2), process.env, io).then((status) => {
  process.exitCode = stdout.closed ? exitCodes.outputClosed : status;
});
