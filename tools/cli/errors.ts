/**
 * How the CLI fails: every error becomes one line on stderr and an exit code. 2 = bad usage
 * (unknown command or option, missing argument, bad setting) or an unreachable endpoint;
 * 1 = the command ran and failed.
 */
export type ExitCode = 0 | 1 | 2;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
    this.name = "CliError";
  }
}

export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = "UsageError";
  }
}

export class CommandFailedError extends CliError {
  constructor(message: string) {
    super(message, 1);
    this.name = "CommandFailedError";
  }
}
