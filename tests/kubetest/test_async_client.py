"""The same server through lightkube's AsyncClient: watch resume and log follow."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lightkube import AsyncClient, KubeConfig
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap

from dispatch_kubetest import FakeAPIServer


def test_async_watch_and_log_follow(server: FakeAPIServer, kubeconfig: Path) -> None:
    cluster = server.control
    cluster.add_node("worker-0")
    cluster.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "node", "image": "i"}], "restartPolicy": "Never"},
        },
        with_status=False,
    )
    cluster.run_pod("p")

    async def scenario() -> tuple[list[tuple[str, str]], list[str]]:
        client = AsyncClient(KubeConfig.from_file(str(kubeconfig)), timeout=10)
        listing = client.list(ConfigMap, namespace="default")
        async for _ in listing:
            pass
        seen: list[tuple[str, str]] = []

        async def watch() -> None:
            async for event, obj in client.watch(
                ConfigMap, namespace="default", resource_version=listing.resourceVersion
            ):
                seen.append((event, obj.metadata.name))
                if len(seen) == 2:
                    return

        watcher = asyncio.create_task(watch())
        await asyncio.to_thread(cluster.wait_for_watches, 1)
        await client.create(ConfigMap(metadata=ObjectMeta(name="a1", namespace="default")))
        await asyncio.to_thread(cluster.drop_watches)
        await client.create(ConfigMap(metadata=ObjectMeta(name="a2", namespace="default")))
        await asyncio.wait_for(watcher, 10)

        cluster.append_log("p", "hello")
        lines: list[str] = []
        first_line = asyncio.Event()

        async def follow() -> None:
            async for line in client.log("p", namespace="default", follow=True):
                lines.append(line)
                first_line.set()

        follower = asyncio.create_task(follow())
        await asyncio.wait_for(first_line.wait(), 10)
        await asyncio.to_thread(cluster.append_log, "p", "world")
        await asyncio.to_thread(cluster.succeed_pod, "p")
        await asyncio.wait_for(follower, 10)
        await client.close()
        return seen, lines

    seen, lines = asyncio.run(scenario())
    assert seen == [("ADDED", "a1"), ("ADDED", "a2")]
    assert lines == ["hello\n", "world\n"]
