import { describe, expect, it } from "vitest";
import { loadConfig, SETTINGS } from "../../functions/allocator/config.ts";
import { InvalidCidrError, InvalidConfigError } from "../../functions/domain/errors.ts";

function failureOf(env: Record<string, string>): Error {
  try {
    loadConfig(env);
  } catch (error) {
    return error as Error;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe("loadConfig", () => {
  it("uses the contract's defaults when nothing is set", () => {
    // Act
    const config = loadConfig({});

    // Assert
    expect(config.pool.cidr).toBe("240.0.0.0/4");
    expect(config.quarantineSeconds).toBe(3600);
    expect(config.tables).toEqual({
      meshes: "meshes",
      dataplanes: "dataplanes",
      vips: "vips",
      claims: "vip-claims",
      index: "vip-index",
    });
    expect(config.endpoint).toBeUndefined();
    expect(config.maxWriteAttempts).toBeGreaterThanOrEqual(1);
  });

  it("takes every setting from the environment", () => {
    // Arrange
    const env = {
      VIP_CIDR: "fd00::/120",
      VIP_QUARANTINE_SECONDS: "0",
      MESHES_TABLE: "m",
      DATAPLANES_TABLE: "d",
      VIPS_TABLE: "v",
      CLAIMS_TABLE: "c",
      VIP_INDEX_TABLE: "i",
      DYNAMODB_ENDPOINT: "http://127.0.0.1:5000",
      VIP_MAX_WRITE_ATTEMPTS: "9",
    };

    // Act
    const config = loadConfig(env);

    // Assert
    expect(config.pool.cidr).toBe("fd00::/120");
    expect(config.quarantineSeconds).toBe(0);
    expect(config.tables).toEqual({
      meshes: "m",
      dataplanes: "d",
      vips: "v",
      claims: "c",
      index: "i",
    });
    expect(config.endpoint).toBe("http://127.0.0.1:5000");
    expect(config.maxWriteAttempts).toBe(9);
  });

  it("takes a VIP_CIDR written with spaces or a long IPv6 form in its canonical form", () => {
    // Act
    const config = loadConfig({ VIP_CIDR: " fd00:0:0:0::/64 " });

    // Assert
    expect(config.pool.cidr).toBe("fd00::/64");
  });

  it("refuses a VIP_CIDR with host bits set, saying which range was meant (decision 144)", () => {
    // Act
    const load = () => loadConfig({ VIP_CIDR: " 10.1.2.3/8 " });

    // Assert
    expect(load).toThrow(
      'invalid VIP range "10.1.2.3/8": host bits set: 10.1.2.3 is not the first address of a /8 range (did you mean 10.0.0.0/8?)',
    );
  });

  it("falls back to the defaults for blank values", () => {
    // Act
    const config = loadConfig({ VIP_CIDR: " ", VIP_QUARANTINE_SECONDS: "", MESHES_TABLE: "" });

    // Assert
    expect(config.pool.cidr).toBe("240.0.0.0/4");
    expect(config.quarantineSeconds).toBe(3600);
    expect(config.tables.meshes).toBe("meshes");
  });

  it("reads the environment variable names it documents", () => {
    expect(SETTINGS.cidr.envVar).toBe("VIP_CIDR");
    expect(SETTINGS.quarantineSeconds.envVar).toBe("VIP_QUARANTINE_SECONDS");
    expect(SETTINGS.endpoint.envVar).toBe("DYNAMODB_ENDPOINT");
  });

  it.each(["240.0.0.0/33", "garbage", "300.0.0.0/4", "240.0.0.0"])(
    "fails on VIP_CIDR=%j with a message naming the value",
    (value) => {
      // Act
      const error = failureOf({ VIP_CIDR: value });

      // Assert
      expect(error).toBeInstanceOf(InvalidCidrError);
      expect(error.message).toContain(value);
    },
  );

  it.each(["-1", "abc", "1.5", "1e3", "99999999999"])(
    "fails on VIP_QUARANTINE_SECONDS=%j with a message naming the setting and value",
    (value) => {
      // Act
      const error = failureOf({ VIP_QUARANTINE_SECONDS: value });

      // Assert
      expect(error).toBeInstanceOf(InvalidConfigError);
      expect((error as InvalidConfigError).setting).toBe("VIP_QUARANTINE_SECONDS");
      expect(error.message).toContain("VIP_QUARANTINE_SECONDS");
      expect(error.message).toContain(JSON.stringify(value));
    },
  );

  it("accepts a quarantine of zero seconds and of one year", () => {
    // Act
    const none = loadConfig({ VIP_QUARANTINE_SECONDS: "0" });
    const year = loadConfig({ VIP_QUARANTINE_SECONDS: String(365 * 24 * 3600) });

    // Assert
    expect(none.quarantineSeconds).toBe(0);
    expect(year.quarantineSeconds).toBe(365 * 24 * 3600);
  });

  it("fails on an endpoint that is not an http(s) URL, naming it", () => {
    // Act
    const error = failureOf({ DYNAMODB_ENDPOINT: "localhost:5000" });

    // Assert
    expect(error).toBeInstanceOf(InvalidConfigError);
    expect(error.message).toContain("localhost:5000");
  });
});
