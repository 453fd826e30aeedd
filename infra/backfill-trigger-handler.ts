/**
 * The backfill trigger's handler: one asynchronous invocation of the allocator
 * (`ALLOCATOR_FUNCTION`) with the payload in `PAYLOAD`. Asynchronous, so a long backfill never
 * holds the deployment and a failed one is retried by Lambda (and shows in the Errors alarm)
 * instead of rolling the stack back; only a refused invocation (permissions, missing function)
 * fails the deployment.
 *
 * Runs as inline CommonJS on the Lambda runtime, which provides `@aws-sdk/client-lambda` (not a
 * dependency of this project): `infra/vip-allocator-backfill.ts` compiles this file with
 * esbuild at synth time and inlines it (`Code.fromInline`).
 */

/** The part of `@aws-sdk/client-lambda` the handler uses. */
interface LambdaSdk {
  LambdaClient: new (
    config: object,
  ) => {
    send(command: object): Promise<{ StatusCode?: number }>;
  };
  InvokeCommand: new (input: {
    FunctionName: string | undefined;
    InvocationType: "Event";
    Payload: string | undefined;
  }) => object;
}

const { LambdaClient, InvokeCommand } = require("@aws-sdk/client-lambda") as LambdaSdk;
const client = new LambdaClient({});

export const handler = async (): Promise<{ statusCode: number | undefined }> => {
  const out = await client.send(
    new InvokeCommand({
      FunctionName: process.env.ALLOCATOR_FUNCTION,
      InvocationType: "Event",
      Payload: process.env.PAYLOAD,
    }),
  );
  if (out.StatusCode !== 202) throw new Error(`allocator invocation returned ${out.StatusCode}`);
  console.log(
    JSON.stringify({ invoked: process.env.ALLOCATOR_FUNCTION, payload: process.env.PAYLOAD }),
  );
  return { statusCode: out.StatusCode };
};
