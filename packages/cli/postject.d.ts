// postject ships no types; this is the one function packages/cli/sea.ts calls.
declare module 'postject' {
  /** Adds `data` as the resource `name` to the executable at `file`, in place. */
  export function inject(
    file: string,
    name: string,
    data: Buffer,
    options?: { sentinelFuse?: string; overwrite?: boolean; machoSegmentName?: string },
  ): Promise<void>;
}
