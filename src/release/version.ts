// The one place the version is written: the root package.json. The CLI's bundle keeps only this
// field of it (packages/cli/build.ts); the image copies the file beside src/ (Dockerfile).
import manifest from '../../package.json' with { type: 'json' };

/** realmgate's version (semantic versioning), the gateway's and the CLI's alike. */
export const VERSION: string = manifest.version;
