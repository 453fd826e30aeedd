import { Duration, Stack } from "aws-cdk-lib";
import { type IRole, PolicyStatement, Role, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import type { IFunction } from "aws-cdk-lib/aws-lambda";
import { Schedule, ScheduleExpression, ScheduleTargetInput } from "aws-cdk-lib/aws-scheduler";
import { LambdaInvoke } from "aws-cdk-lib/aws-scheduler-targets";
import type { Construct } from "constructs";
import { SCHEDULED_SWEEP } from "../functions/allocator/config.ts";
import { VIP_ALLOCATOR_DEFAULTS } from "./vip-allocator-props.ts";

/**
 * EventBridge Scheduler invokes the function with {@link SCHEDULED_SWEEP} every `period`,
 * under a role of its own that may only invoke this function.
 */
export function addSweepSchedule(scope: Construct, fn: IFunction, period: Duration): Schedule {
  const stack = Stack.of(scope);
  const role = new Role(scope, "SweepScheduleRole", {
    assumedBy: new ServicePrincipal("scheduler.amazonaws.com", {
      conditions: { StringEquals: { "aws:SourceAccount": stack.account } },
    }),
    description: "VIP allocator repair sweep schedule: invoke the allocator function only",
  });
  return new Schedule(scope, "SweepSchedule", {
    schedule: ScheduleExpression.rate(period),
    description: `VIP allocator: repair sweep over every mesh, every ${period.toHumanString()}`,
    target: new InvokeUnqualified(fn, {
      role,
      input: ScheduleTargetInput.fromObject(SCHEDULED_SWEEP),
      // A sweep that could not be delivered within one period is superseded by the next
      // one (the sweep keeps its position in the claims table), so no dead-letter queue.
      retryAttempts: VIP_ALLOCATOR_DEFAULTS.sweepRetryAttempts,
      maxEventAge: Duration.seconds(Math.max(60, Math.min(period.toSeconds(), 86_400))),
    }),
  });
}

/**
 * `LambdaInvoke` whose role may invoke only the function's unqualified ARN (the schedule's
 * target), not every version and alias of it (`grantInvoke`'s `ARN:*`, cdk-nag IAM5).
 */
class InvokeUnqualified extends LambdaInvoke {
  protected override addTargetActionToRole(role: IRole): void {
    role.addToPrincipalPolicy(
      new PolicyStatement({ actions: ["lambda:InvokeFunction"], resources: [this.targetArn] }),
    );
  }
}
