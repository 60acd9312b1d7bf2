/**
 * The files an operator command names (`--file <path>`, "-" for standard input) are read by the
 * `c2c` process the operator runs, before the command goes anywhere: relative to the operator's
 * directory, with the operator's rights. The command then carries their text, whether it runs in
 * this process or inside a running server (admin-bridge.ts), which never reads a path itself.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

/** Each `--file` argument as written, with the text it named. */
export type AttachedFiles = Readonly<Record<string, string>>;

/** The flags that name a file: `--file`, and a second secret's `--api-key-secret-file`. */
const FILE_FLAGS = ['--file', '--api-key-secret-file'];

/** The file arguments of a command line: `--file x` and `--file=x` (and the like), up to a `--`. */
export function fileArguments(argv: readonly string[]): string[] {
  const paths: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') break;
    const joined = FILE_FLAGS.find((flag) => arg.startsWith(`${flag}=`));
    if (FILE_FLAGS.includes(arg) && i + 1 < argv.length) paths.push(argv[++i]!);
    else if (joined) paths.push(arg.slice(joined.length + 1));
  }
  return paths;
}

/** Reads the files a command line names; throws a one-line Error naming the file it could not read. */
export function readAttachedFiles(argv: readonly string[], cwd = process.cwd(), read: (path: string | 0) => string = (path) => readFileSync(path, 'utf8')): AttachedFiles {
  const files: Record<string, string> = {};
  for (const path of fileArguments(argv)) {
    if (Object.hasOwn(files, path)) continue;
    try {
      files[path] = read(path === '-' ? 0 : resolve(cwd, path));
    } catch (error) {
      throw new Error(`cannot read --file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
    }
  }
  return files;
}

/** The text of a `--file` argument, as the operator's c2c process read it. */
export function attachedText(files: AttachedFiles, path: string): string {
  if (!Object.hasOwn(files, path)) throw new Error(`--file ${path} was not read by the c2c command that sent this one`);
  return files[path]!;
}
