import { readFileSync } from "node:fs";
import { App, CfnElement, Stack } from "aws-cdk-lib";
import { Template } from "aws-cdk-lib/assertions";
import type { IConstruct } from "constructs";
import { VipAllocator, type VipAllocatorProps } from "../../infra/vip-allocator.ts";
import { VipAllocatorStack } from "../../infra/vip-allocator-stack.ts";

/** The feature flags `cdk synth` runs with, so unit tests synthesize the same template. */
const CDK_JSON_CONTEXT = (
  JSON.parse(readFileSync(new URL("../../cdk.json", import.meta.url), "utf8")) as {
    context: Record<string, unknown>;
  }
).context;

/** An App with the project's feature flags and esbuild bundling skipped (fast unit tests). */
export function testApp(context: Record<string, unknown> = {}): App {
  return new App({
    context: { ...CDK_JSON_CONTEXT, "aws:cdk:bundling-stacks": [], ...context },
  });
}

export interface Built {
  readonly app: App;
  readonly stack: Stack;
  readonly allocator: VipAllocator;
}

export interface Synthesized extends Built {
  readonly template: Template;
}

/** Props, or a function of the stack for props that need constructs (keys, topics). */
export type PropsInput = VipAllocatorProps | ((stack: Stack) => VipAllocatorProps);

/** A VipAllocator in a plain, env-agnostic stack, not yet synthesized. */
export function build(props: PropsInput = {}): Built {
  const app = testApp();
  const stack = new Stack(app, "Test");
  const resolved = typeof props === "function" ? props(stack) : props;
  const allocator = new VipAllocator(stack, "VipAllocator", resolved);
  return { app, stack, allocator };
}

export function synth(props: PropsInput = {}): Synthesized {
  const built = build(props);
  return { ...built, template: Template.fromStack(built.stack) };
}

/** The deployable stack (outputs, context) as `infra/app.ts` creates it. */
export function synthStack(context: Record<string, unknown> = {}): {
  readonly stack: VipAllocatorStack;
  readonly template: Template;
} {
  const stack = new VipAllocatorStack(testApp(context), "VipAllocator");
  return { stack, template: Template.fromStack(stack) };
}

/** The logical id of a construct's CloudFormation resource, read from the construct tree. */
export function logicalId(construct: IConstruct): string {
  const resource = construct instanceof CfnElement ? construct : construct.node.defaultChild;
  if (!(resource instanceof CfnElement)) {
    throw new Error(`${construct.node.path} has no CloudFormation resource`);
  }
  return Stack.of(resource).getLogicalId(resource);
}

export const getAtt = (construct: IConstruct, attribute: string) => ({
  "Fn::GetAtt": [logicalId(construct), attribute],
});

export const ref = (construct: IConstruct) => ({ Ref: logicalId(construct) });

type Statement = { Effect: string; Action: string | string[]; Resource: unknown };

/**
 * The permissions the template grants to one role, flattened to resource -> sorted actions
 * (resources as JSON), so a test can state "exactly these actions on exactly these
 * resources".
 */
export function permissionsOf(template: Template, role: IConstruct): Map<string, string[]> {
  const roleRef = JSON.stringify(ref(role));
  const policies = Object.values(template.findResources("AWS::IAM::Policy")).filter((policy) =>
    (policy.Properties.Roles as unknown[]).some((r) => JSON.stringify(r) === roleRef),
  );
  const permissions = new Map<string, Set<string>>();
  for (const policy of policies) {
    for (const statement of policy.Properties.PolicyDocument.Statement as Statement[]) {
      if (statement.Effect !== "Allow") throw new Error(`unexpected ${statement.Effect} statement`);
      const actions = [statement.Action].flat();
      for (const resource of [statement.Resource].flat()) {
        const key = JSON.stringify(resource);
        const set = permissions.get(key) ?? new Set<string>();
        for (const action of actions) set.add(action);
        permissions.set(key, set);
      }
    }
  }
  return new Map([...permissions].map(([key, set]) => [key, [...set].sort()]));
}
