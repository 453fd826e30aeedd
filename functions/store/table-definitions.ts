/**
 * The one definition of every table: keys, stream view type, the environment variable that
 * names it and its default name. The CDK construct, the local CLI (`tables create`) and the
 * test setup all derive their tables from this module, so they cannot drift apart.
 *
 * Pure data: no AWS SDK and no CDK import, so both sides can map it to their own types.
 */

export type KeyType = "S" | "N" | "B";

export interface KeyDefinition {
  readonly name: string;
  readonly type: KeyType;
}

export interface TableDefinition {
  /** Logical id, also used for CDK construct ids. */
  readonly id: "meshes" | "dataplanes" | "externalServices" | "vips" | "claims" | "index";
  /** Environment variable that overrides the physical table name. */
  readonly envVar: string;
  /** Physical name when the environment variable is unset. */
  readonly defaultName: string;
  readonly partitionKey: KeyDefinition;
  readonly sortKey?: KeyDefinition;
  /** Stream view type, or undefined for no stream. */
  readonly stream?: "NEW_AND_OLD_IMAGES";
  /** Global secondary indexes, each holding the key and the `include`d attributes only. */
  readonly indexes?: readonly IndexDefinition[];
  /** The attribute DynamoDB's time to live reads (epoch seconds), if the table has one. */
  readonly timeToLiveAttribute?: string;
}

export interface IndexDefinition {
  readonly name: string;
  readonly partitionKey: KeyDefinition;
  readonly include: readonly string[];
}

/**
 * The versions of the VIP items, and nothing else: a reader's version probe reads this index
 * (a Scan billed by the few bytes each entry holds) instead of the items (billed by their
 * whole size, whatever the projection).
 */
export const VERSIONS_INDEX: IndexDefinition = {
  name: "versions",
  partitionKey: { name: "mesh", type: "S" },
  include: ["version", "incarnation"],
};

export const MESHES_TABLE: TableDefinition = {
  id: "meshes",
  envVar: "MESHES_TABLE",
  defaultName: "meshes",
  partitionKey: { name: "name", type: "S" },
  stream: "NEW_AND_OLD_IMAGES",
};

export const DATAPLANES_TABLE: TableDefinition = {
  id: "dataplanes",
  envVar: "DATAPLANES_TABLE",
  defaultName: "dataplanes",
  partitionKey: { name: "mesh", type: "S" },
  sortKey: { name: "name", type: "S" },
  stream: "NEW_AND_OLD_IMAGES",
};

/**
 * Kuma's ExternalService resources (key mesh/name, like dataplanes): optional. A deployment
 * without it behaves as if it were empty. The function uses it only when its environment
 * variable names it (no default for the function); the local runtime always has it, under the
 * default name.
 */
export const EXTERNAL_SERVICES_TABLE: TableDefinition = {
  id: "externalServices",
  envVar: "EXTERNAL_SERVICES_TABLE",
  defaultName: "external-services",
  partitionKey: { name: "mesh", type: "S" },
  sortKey: { name: "name", type: "S" },
  stream: "NEW_AND_OLD_IMAGES",
};

/** One VIP item per mesh, read by downstream services. */
export const VIPS_TABLE: TableDefinition = {
  id: "vips",
  envVar: "VIPS_TABLE",
  defaultName: "vips",
  partitionKey: { name: "mesh", type: "S" },
  indexes: [VERSIONS_INDEX],
};

/**
 * The allocator's private state: service claims (`svc#<name>`), address claims (`addr#<ip>`),
 * pool cursors (`pool#<cidr>`) and the renumbering count (store/claim-items.ts). Never read by
 * downstream services.
 */
export const CLAIMS_TABLE: TableDefinition = {
  id: "claims",
  envVar: "CLAIMS_TABLE",
  defaultName: "vip-claims",
  partitionKey: { name: "pk", type: "S" },
};

/**
 * The allocator's private membership index (store/index-items.ts): contributor entries
 * (`m#<mesh>` / `<service>#<dataplane id>`) and one record per dataplane (`d#<mesh>` /
 * `<name>`) of what it contributes now. Derived from the dataplanes table; rebuildable from it.
 */
export const INDEX_TABLE: TableDefinition = {
  id: "index",
  envVar: "VIP_INDEX_TABLE",
  defaultName: "vip-index",
  partitionKey: { name: "pk", type: "S" },
  sortKey: { name: "sk", type: "S" },
  // Tombstones of dataplanes that contribute nothing expire (store/index-items.ts).
  timeToLiveAttribute: "expiresAt",
};

export const ALL_TABLES: readonly TableDefinition[] = [
  MESHES_TABLE,
  DATAPLANES_TABLE,
  VIPS_TABLE,
  CLAIMS_TABLE,
  INDEX_TABLE,
];

/** The optional input tables: used only when named (see {@link resolveTableNames}). */
export const OPTIONAL_TABLES: readonly TableDefinition[] = [EXTERNAL_SERVICES_TABLE];

export type TableNames = Readonly<
  Record<Exclude<TableDefinition["id"], "externalServices">, string>
> & {
  /** The external-services table; undefined: the deployment has none. */
  readonly externalServices?: string;
};

/**
 * Resolves physical table names from an environment-like record. The optional tables are
 * undefined unless their variable names them, or `withOptional` asks for them by default name
 * (the local runtime).
 */
export function resolveTableNames(
  env: Readonly<Record<string, string | undefined>>,
  withOptional = false,
): TableNames {
  const name = (def: TableDefinition): string => {
    const value = env[def.envVar];
    return value === undefined || value === "" ? def.defaultName : value;
  };
  const external = env[EXTERNAL_SERVICES_TABLE.envVar]?.trim();
  return {
    meshes: name(MESHES_TABLE),
    dataplanes: name(DATAPLANES_TABLE),
    vips: name(VIPS_TABLE),
    claims: name(CLAIMS_TABLE),
    index: name(INDEX_TABLE),
    ...(external !== undefined && external !== ""
      ? { externalServices: external }
      : withOptional
        ? { externalServices: EXTERNAL_SERVICES_TABLE.defaultName }
        : {}),
  };
}

/**
 * The environment that names every table `<prefix>-<id>` (e.g. `t3-meshes`): tables of their
 * own for one test, benchmark run or emulator session, so runs sharing an endpoint never see
 * each other's items or streams.
 */
export function prefixedTableEnv(
  prefix: string,
  options: { readonly externalServices?: boolean } = {},
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const def of ALL_TABLES) env[def.envVar] = `${prefix}-${def.id}`;
  if (options.externalServices === true) {
    env[EXTERNAL_SERVICES_TABLE.envVar] = `${prefix}-${EXTERNAL_SERVICES_TABLE.id}`;
  }
  return env;
}

/**
 * The one parser of DynamoDB stream ARNs
 * (`arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME/stream/LABEL`), used by the allocator,
 * the local poller and the CDK construct.
 */
export interface StreamArn {
  /** NAME: the first `:table/NAME/stream/` in the text. */
  readonly tableName: string;
  /** What follows `/stream/`. */
  readonly label: string;
  /** What precedes `:table/` (`arn:PARTITION:dynamodb:REGION:ACCOUNT` in a real ARN). */
  readonly prefix: string;
  /**
   * The whole text is a stream ARN as AWS writes them: an `aws*` partition, a region, a
   * 12-digit account, a valid table name (3 to 255 of a-z A-Z 0-9 _ . -) and a label without
   * `/` or whitespace.
   */
  readonly wellFormed: boolean;
}

const PARTS = /^(.*?):table\/([^/]+)\/stream\/(.*)$/s;
const PREFIX = /^arn:aws[a-z-]*:dynamodb:[a-z0-9-]+:\d{12}$/;
const TABLE_NAME = /^[a-zA-Z0-9_.-]{3,255}$/;
const LABEL = /^[^/\s]+$/;

/** The parts of a stream ARN, or undefined when the text has no `:table/NAME/stream/`. */
export function parseStreamArn(arn: string | undefined): StreamArn | undefined {
  const match = arn === undefined ? null : PARTS.exec(arn);
  if (match === null) return undefined;
  const [, prefix = "", tableName = "", label = ""] = match;
  return {
    tableName,
    label,
    prefix,
    wellFormed: PREFIX.test(prefix) && TABLE_NAME.test(tableName) && LABEL.test(label),
  };
}
