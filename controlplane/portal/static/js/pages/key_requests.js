// Pending key requests (platform operators): approve (the full key shown once, copyable) or deny.
import { want } from "../api.js";
import { announce, clear, h, table, when } from "../dom.js";
import { busy, guarded, showSecretOnce } from "./common.js";

export default {
  path: "key-requests",
  title: "Key requests",
  async render(view) {
    const slot = h("div", {}, h("p", { class: "loading" }, "Loading requests…"));
    view.append(slot);
    async function load() {
      await guarded(slot, async () => {
        const rows = await want("cp", "/api/keys/requests");
        clear(
          slot,
          table(
            "Pending key requests",
            ["Request", "Tenant", "Routes", "Reason", "Requested by", "Requested", ""],
            rows,
            (r) => [
              h("strong", {}, r.name),
              r.tenant_id,
              (r.routes || []).join(", "),
              r.reason,
              r.email,
              when(r.requested_at),
              actions(r),
            ],
            "No pending key requests.",
          ),
        );
      });
    }
    function actions(r) {
      const approve = h("button", { type: "button", class: "primary", "aria-label": `Approve ${r.name}` }, "Approve");
      const deny = h("button", { type: "button", class: "danger", "aria-label": `Deny ${r.name}` }, "Deny");
      approve.addEventListener(
        "click",
        busy(approve, async () => {
          const answer = await want("cp", `/api/keys/requests/${encodeURIComponent(r.id)}/approve`, { method: "POST" });
          await showSecretOnce(`Key ${answer.name} approved`, answer.full_key);
          await load();
        }),
      );
      deny.addEventListener(
        "click",
        busy(deny, async () => {
          await want("cp", `/api/keys/requests/${encodeURIComponent(r.id)}/deny`, { method: "POST" });
          announce(`Request ${r.name} denied.`, "ok");
          await load();
        }),
      );
      return h("div", { class: "actions" }, approve, deny);
    }
    await load();
  },
};
