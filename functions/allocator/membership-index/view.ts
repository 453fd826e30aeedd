import { applyPresence } from "../../domain/contributions.ts";
import type { MembershipIndex } from "../../store/ports.ts";
import { listedServices, type ServiceSetView, same } from "../pass/service-set-view.ts";

/**
 * The incremental view: the item's services, with only the `touched` ones looked up in the
 * membership index (one `Limit: 1` query each). A mesh with no item, or one whose own record
 * arrived (`touched` = "all"), reads its whole service set from the index (one paged query of
 * its entries), never from the dataplanes table. `named`: the services the batch's records
 * named in the mesh (`touched`, unless that is "all").
 */
export function indexView(
  index: MembershipIndex,
  touched: ReadonlySet<string> | "all",
  known: ReadonlySet<string> = new Set(),
  named: ReadonlySet<string> = touched === "all" ? new Set() : touched,
): ServiceSetView {
  let full = touched === "all";
  /**
   * Which touched services are present. `trusted` are taken as present without asking: what
   * this invocation's own index update wrote. That holds only until another invocation changes
   * the same dataplanes, so it serves the first read alone; a later attempt and the check after
   * a write ask the index about every touched service (a pass that trusted a presence another
   * invocation has since removed finds out there, and goes round again).
   */
  const presence = async (
    mesh: string,
    services: ReadonlySet<string>,
    trusted: ReadonlySet<string>,
  ) => {
    const unknown = [...services].filter((service) => !trusted.has(service));
    const found = unknown.length === 0 ? new Set<string>() : await index.present(mesh, unknown);
    for (const service of services) if (trusted.has(service)) found.add(service);
    return found;
  };
  const none: ReadonlySet<string> = new Set();
  return {
    touched: named,
    async read(mesh, current, attempt) {
      if (touched === "all" || current === undefined) {
        full = true;
        return { services: await index.servicesOf(mesh), issues: [] };
      }
      full = false;
      const present = await presence(mesh, touched, attempt === 1 ? known : none);
      return { services: applyPresence(listedServices(current), touched, present), issues: [] };
    },
    async still(mesh, services) {
      if (full || touched === "all") return same(await index.servicesOf(mesh), services);
      const present = await presence(mesh, touched, none);
      const listed = new Set(services);
      return [...touched].every((service) => present.has(service) === listed.has(service));
    },
  };
}
