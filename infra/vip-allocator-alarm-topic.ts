import { ArnFormat, Stack } from "aws-cdk-lib";
import { PolicyStatement, ServicePrincipal } from "aws-cdk-lib/aws-iam";
import { Key } from "aws-cdk-lib/aws-kms";
import { Topic } from "aws-cdk-lib/aws-sns";
import type { Construct } from "constructs";
import type { ResolvedProps } from "./vip-allocator-props.ts";

/**
 * The default alarm topic: encrypted with a customer-managed key (the AWS-managed SNS key's
 * policy cannot let CloudWatch use it), TLS only, and CloudWatch alarms of this account may
 * publish to it and use the key.
 */
export function createAlarmTopic(
  scope: Construct,
  removalPolicy: ResolvedProps["removalPolicy"],
): { topic: Topic; key: Key } {
  const stack = Stack.of(scope);
  const cloudwatch = new ServicePrincipal("cloudwatch.amazonaws.com");
  const key = new Key(scope, "AlarmTopicKey", {
    description: "VIP allocator: encrypts the alarm topic",
    enableKeyRotation: true,
    removalPolicy,
  });
  key.addToResourcePolicy(
    new PolicyStatement({
      principals: [cloudwatch],
      actions: ["kms:Decrypt", "kms:GenerateDataKey*"],
      resources: ["*"],
      // Only on behalf of this account's alarms (confused deputy).
      conditions: { StringEquals: { "aws:SourceAccount": stack.account } },
    }),
  );
  const topic = new Topic(scope, "AlarmTopic", {
    displayName: "VIP allocator alarms",
    masterKey: key,
    enforceSSL: true,
  });
  topic.applyRemovalPolicy(removalPolicy);
  topic.addToResourcePolicy(
    new PolicyStatement({
      principals: [cloudwatch],
      actions: ["sns:Publish"],
      resources: [topic.topicArn],
      conditions: {
        ArnLike: {
          "aws:SourceArn": stack.formatArn({
            service: "cloudwatch",
            resource: "alarm",
            resourceName: "*",
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        },
        StringEquals: { "aws:SourceAccount": stack.account },
      },
    }),
  );
  return { topic, key };
}
