import type { DynamoDBClient } from "@aws-sdk/client-dynamodb";

/**
 * Counts a client's requests by operation (a middleware without side requests, so wall times
 * stay comparable; capacity units need bench/cost-meter.ts).
 */
export class RequestCounter {
  readonly byOperation = new Map<string, number>();

  install(client: DynamoDBClient): void {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const operation = String(context.commandName).replace(/Command$/, "");
        this.byOperation.set(operation, (this.byOperation.get(operation) ?? 0) + 1);
        return await next(args);
      },
      { step: "initialize", name: "requestCounter" },
    );
  }

  total(): number {
    return [...this.byOperation.values()].reduce((a, b) => a + b, 0);
  }

  reset(): void {
    this.byOperation.clear();
  }

  /** `Operation N, ...`, most frequent first. */
  describe(): string {
    return [...this.byOperation]
      .sort(([, a], [, b]) => b - a)
      .map(([operation, count]) => `${operation} ${count}`)
      .join(", ");
  }
}
