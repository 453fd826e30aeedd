import { InvokeCommand, LambdaClient } from "@aws-sdk/client-lambda";

/**
 * Starts another invocation of the function that runs this code, asynchronously
 * (`InvocationType: Event`; decision 160): the request returns once Lambda has queued the
 * event. The client is made on first use, so an invocation that never continues pays nothing.
 */
export class LambdaSelfInvoker {
  private static client: LambdaClient | undefined;

  constructor(private readonly functionArn: string) {}

  async invokeAsync(payload: object): Promise<void> {
    LambdaSelfInvoker.client ??= new LambdaClient({ maxAttempts: 5 });
    const result = await LambdaSelfInvoker.client.send(
      new InvokeCommand({
        FunctionName: this.functionArn,
        InvocationType: "Event",
        Payload: new TextEncoder().encode(JSON.stringify(payload)),
      }),
    );
    if (result.StatusCode !== 202) {
      throw new Error(`asynchronous invoke of ${this.functionArn}: status ${result.StatusCode}`);
    }
  }
}
