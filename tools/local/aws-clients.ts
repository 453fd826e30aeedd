type Env = Readonly<Record<string, string | undefined>>;

/** Static credentials, structurally what every SDK v3 client accepts. */
export interface StaticCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string;
}

/** What the local runtime needs to build an AWS SDK client. */
export interface ClientSettings {
  /** A DynamoDB-compatible endpoint (moto_server); unset means real AWS. */
  readonly endpoint?: string | undefined;
  readonly region?: string | undefined;
  readonly credentials?: StaticCredentials | undefined;
}

/** Static credentials for a local emulator, which accepts any. Never used against real AWS. */
export const EMULATOR_CREDENTIALS: StaticCredentials = {
  accessKeyId: "test",
  secretAccessKey: "test",
};

/** `AWS_REGION`, else `AWS_DEFAULT_REGION`, else undefined. */
export function regionFromEnv(env: Env = process.env): string | undefined {
  return env.AWS_REGION?.trim() || env.AWS_DEFAULT_REGION?.trim() || undefined;
}

/** {@link regionFromEnv}, else us-east-1 (moto's home region): the region of a local engine. */
export function resolveRegion(env: Env = process.env): string {
  return regionFromEnv(env) ?? "us-east-1";
}

/** True when the environment names credentials the default provider chain would find first. */
export function hasCredentialsInEnv(env: Env = process.env): boolean {
  return Boolean(
    (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) ||
      env.AWS_PROFILE ||
      env.AWS_WEB_IDENTITY_TOKEN_FILE ||
      env.AWS_CONTAINER_CREDENTIALS_FULL_URI ||
      env.AWS_CONTAINER_CREDENTIALS_RELATIVE_URI,
  );
}

/**
 * SDK client configuration: with an endpoint and no credentials anywhere in the environment,
 * dummy static credentials (an emulator accepts any, and the default chain would otherwise
 * wait on the instance metadata service); without an endpoint, the SDK's default chain. The
 * region: the given one, else the environment's; with an endpoint, us-east-1 by default;
 * without one and none in the environment, none (the SDK reads the profile's, `AWS_PROFILE`).
 */
export function clientConfig(
  settings: ClientSettings,
  env: Env = process.env,
): { region?: string; endpoint?: string; credentials?: StaticCredentials } {
  const region =
    settings.region ?? (settings.endpoint !== undefined ? resolveRegion(env) : regionFromEnv(env));
  const credentials =
    settings.credentials ??
    (settings.endpoint !== undefined && !hasCredentialsInEnv(env)
      ? EMULATOR_CREDENTIALS
      : undefined);
  return {
    ...(region !== undefined ? { region } : {}),
    ...(settings.endpoint !== undefined ? { endpoint: settings.endpoint } : {}),
    ...(credentials !== undefined ? { credentials } : {}),
  };
}
