import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";
import { VipAllocatorStack } from "./vip-allocator-stack.ts";

// Env-agnostic on purpose: `cdk synth` needs no AWS credentials; `cdk deploy` uses the
// account and region of the caller's credentials.
const app = new App();
new VipAllocatorStack(app, "VipAllocator");
// cdk-nag v3: the AwsSolutions pack runs as a policy-validation plugin at synth time; any
// finding not acknowledged in code (infra/vip-allocator.ts) fails the synth.
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
