import { Policy, PolicyStatement, type Role } from "aws-cdk-lib/aws-iam";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import type { Construct } from "constructs";

/**
 * The function may invoke itself (decision 160): a pass or a backfill that runs out of the
 * invocation's time goes on in an asynchronous invocation of the same function. A policy of
 * its own on the function's role, not the role's default policy: the function depends on that
 * one, and a statement naming the function's ARN there would be a dependency cycle. Only the
 * function's own ARN, only `lambda:InvokeFunction`.
 */
export function grantSelfInvoke(scope: Construct, fn: IFunction, role: Role): Policy {
  return new Policy(scope, "ContinuationPolicy", {
    roles: [role],
    statements: [
      new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [fn.functionArn] }),
    ],
  });
}
