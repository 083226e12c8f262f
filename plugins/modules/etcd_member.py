#!/usr/bin/python
# Copyright: gpufleet contributors
# Apache License 2.0
from __future__ import annotations

DOCUMENTATION = r"""
module: etcd_member
short_description: Read an etcd member's static pod manifest, or move the member to an etcd release
version_added: 0.2.0
description:
  - Runs on the member's host. Reads its etcd static pod manifest (kubeadm's for a stacked member, or the one
    kubeadm's guide to an external etcd run by kubelets writes) and returns the member's name, client and peer
    URLs, data directory, image and release.
  - With O(version), sets the etcd container's image to that release (O(image), else the manifest's repository
    with kubeadm's tag C(X.Y.Z-0)). Only the one line that names the image changes; the file is replaced
    atomically (a temporary file hidden from the kubelet, then renamed), and the kubelet restarts the member from
    it. Check mode says what would change and writes nothing.
  - Fails, naming the host and the file, on a manifest that is not an etcd static pod, an image without a tag, a
    command without C(--name), or an image line it cannot rewrite alone.
options:
  host:
    description: The host's name in messages (its inventory name).
    type: str
    required: true
  manifest:
    description: The member's etcd static pod manifest.
    type: path
    default: /etc/kubernetes/manifests/etcd.yaml
  version:
    description: The etcd release to move the member to (X.Y.Z or vX.Y.Z). Omitted, the member is only read.
    type: str
  image:
    description: The image to run, REPOSITORY:TAG with the tag of O(version) (a mirror's registry). Default - the
      manifest's repository, the tag in its form (kubeadm's C(X.Y.Z-0), or C(X.Y.Z), C(vX.Y.Z)).
    type: str
extends_documentation_fragment:
  - gpufleet.upgrade.common.CHECK
author:
  - gpufleet maintainers (@gpufleet)
"""

EXAMPLES = r"""
- name: Read each member's manifest
  gpufleet.upgrade.etcd_member:
    host: "{{ inventory_hostname }}"
  register: member

- name: Move this member to etcd 3.7.3 (the kubelet restarts it)
  gpufleet.upgrade.etcd_member:
    host: "{{ inventory_hostname }}"
    version: 3.7.3
"""

RETURN = r"""
host:
  description: The host's name, as given.
  returned: always
  type: str
member:
  description: The member as its manifest says before any change - name, image, repository, tag, version,
    client_urls, peer_urls, data_dir.
  returned: always
  type: dict
image:
  description: The image the manifest names now (after a change; in check mode, the one it would name).
  returned: always
  type: str
previous_image:
  description: The image it named before.
  returned: always
  type: str
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.upgrade.plugins.module_utils import etcd_upgrade
from ansible_collections.gpufleet.upgrade.plugins.module_utils.module_support import run_module
from ansible_collections.gpufleet.upgrade.plugins.module_utils.textparse import read_file


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            manifest=dict(type="path", default=etcd_upgrade.MANIFEST),
            version=dict(type="str"),
            image=dict(type="str"),
        ),
        supports_check_mode=True,
    )

    def body():
        p = module.params
        where = "%s: %s" % (p["host"], p["manifest"])
        text = read_file(p["manifest"], where)
        member = etcd_upgrade.read_member(text, where)
        result = {"host": p["host"], "member": member, "image": member["image"], "previous_image": member["image"],
                  "changed": False}
        if p["version"] is None:
            return result
        wanted = etcd_upgrade.image_for(member, p["version"], p["image"])
        new_text = etcd_upgrade.set_image(text, wanted, where)[0]
        result["image"] = etcd_upgrade.read_member(new_text, where)["image"]
        result["changed"] = new_text != text
        if result["changed"] and not module.check_mode:
            # hidden from the kubelet (it ignores dot files) until renamed over the manifest, in one step
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(p["manifest"]), prefix=".etcd-gpufleet-")
            with os.fdopen(fd, "w") as handle:
                handle.write(new_text)
            module.atomic_move(tmp, p["manifest"])
        return result

    run_module(module, body)


if __name__ == "__main__":
    main()
