"""Writes the heldout2 .eml files (run once; kept for provenance).

Bodies are verbatim from the stored archive-page excerpts; headers are reconstructed from what
the page showed (see README.md).  Not imported by anything.
"""

from __future__ import annotations

from email.header import Header
from pathlib import Path

HERE = Path(__file__).resolve().parent

MSGS: list[tuple[str, dict, str]] = []


def add(name: str, headers: dict, body: str) -> None:
    MSGS.append((name, headers, body))


add("h2p01", {"From": "Greg Smith <unknown@heldout.invalid>", "Date": "Wed, 21 May 2008 13:42:43 EST",
              "Subject": "PostgreSQL pgbench performance regression in 2.6.23+"}, r'''
PostgreSQL ships with a simple database benchmarking tool named pgbench, in what's labeled the contrib section (in many distributions it's a separate package from the main server/client ones). I see there's been some work done already improving how the PostgreSQL server works under the new scheduler (the "Poor PostgreSQL scaling on Linux 2.6.25-rc5" thread). I wanted to provide you a different test case using pgbench that has taken a sharp dive starting with 2.6.23, and the server improvement changes in 2.6.25 actually made this problem worse.

I think it will be easy for someone else to replicate my results and I'll go over the exact procedure below. To start with a view of how bad the regression is, here's a summary of the results on one system, an AMD X2 4600+ running at 2.4GHz, with a few interesting kernels. I threw in results from Solaris 10 on this system as a nice independant reference point. The numbers here are transactions/second (TPS) running a simple read-only test over a 160MB data set, I took the median from 3 test runs:

Clients 2.6.9 2.6.22 2.6.24 2.6.25 Solaris
1 11173 11052 10526 10700 9656
2 18035 16352 14447 10370 14518
3 19365 15414 17784 9403 14062
4 18975 14290 16832 8882 14568
5 18652 14211 16356 8527 15062
6 17830 13291 16763 9473 15314
8 15837 12374 15343 9093 15164
10 14829 11218 10732 9057 14967
15 14053 11116 7460 7113 13944
20 13713 11412 7171 7017 13357
30 13454 11191 7049 6896 12987
40 13103 11062 7001 6820 12871
50 12311 11255 6915 6797 12858

That's the CentOS 4 2.6.9 kernel there, while the rest are stock ones I compiled with a minimum of fiddling from the defaults (just adding support for my SATA RAID card). You can see a major drop with the recent kernels at high client loads, and the changes in 2.6.25 seem to have really hurt even the low client count ones.

The other recent hardware I have here, an Intel Q6600 based sy
''')

add("h2p02", {"From": "Christian Loehle <unknown@heldout.invalid>", "Date": "Thu, 16 Apr 2026 16:13:49 EST",
              "Subject": "Re: sched/fair: DELAY_DEQUEUE causes ~25% pipe IPC regression on Raspberry Pi 5"}, r'''
On 4/16/26 13:22, Tom Gebhardt wrote:
> Hi Peter,
>
> I would like to report a measurable pipe IPC throughput regression introduced by
> commit 152e11f ("sched/fair: Implement delayed dequeue"), first
> present in v6.12-rc1.
>
> This has been independently confirmed on the official Raspberry Pi
> Linux issue tracker
> (raspberrypi/linux #7308), where the RPi kernel team directed the
> issue upstream.
>
>
> Hardware / Software
> -------------------
> - Raspberry Pi 5 Model B, BCM2712 (C1 stepping), 8 GB RAM
> - Raspberry Pi OS Bookworm (arm64)
> - Kernels tested: 6.6.78-v8-16k+ (rpi-6.6.y), 6.12.75+rpt-rpi-2712,
> 6.12.81-v8-16k+ (custom)
> - Benchmark: stress-ng 0.15.06, --pipe 4 --timeout 20s --metrics-brief
>
>
> Observed regression
> -------------------
> Comparing pipe IPC throughput across kernels (overclocked, arm_freq=2800):
>
> Kernel pipe bogo ops/s vs. 6.6
> 6.6.78 2 487 746 100%
> 6.12.75 1 651 427 -34%
> 6.18.21 2 049 701 -18%
>
> This regression pattern is consistent across two separate Raspberry Pi
> 5 units and has
> been independently reproduced by the RPi kernel team with 20-run averages:
> 6.6=2065 Kops/s, 6.12=1662, 6.18=1805, 7.0=1570 (lowest).
>

I guess running anything closer to mainline isn't an option for you?
There have been a bunch of fixes recently on eevdf, maybe some were missed,
so I did a quick skimming through.
Full list of kernel/sched/fair.c changes not on 6.18.y:
059258b0d424 ("sched/fair: Prevent negative lag increase during delayed dequeue")
089d84203ad4 ("sched/fair: Fold the sched_avg update")
0ab25ea2a3b3 ("sched/fair: Simplify task_numa_find_cpu()")
04e49d926f43 ("sched: Enable context analysis for core.c and fair.c")
15257cc2f905 ("sched/fair: Revert force wakeup preemption")
1ae5f5dfe5ad ("sched: Cleanup sched_delayed handling for class switches")
1e900f415c60 ("sched: Detect per-c
''')

add("h2p03", {"From": "Darrick J. Wong <unknown@heldout.invalid>",
              "Subject": "Re: [PATCH v1 resend hot_track 00/16] vfs: hot data tracking"}, r'''
On Mon, Dec 10, 2012 at 11:30:03AM +0800, Zhi Yong Wu wrote:
> HI, all guys.
> 
> any comments or suggestions?

Why did ffsb drop from 924 transactions/sec to 322?

--D
> 
> On Thu, Dec 6, 2012 at 11:28 AM, Zhi Yong Wu <wuzhy@xxxxxxxxxxxxxxxxxx> wrote:
> > HI, guys
> >
> > THe perf testing is done separately with fs_mark, fio, ffsb and
> > compilebench in one kvm guest.
> >
> > Below is the performance testing report for hot tracking, and no obvious
> > perf downgrade is found.
> >
> > Note: original kernel means its source code is not changed;
> >       kernel with enabled hot tracking means its source code is with hot
> > tracking patchset.
> >
> > The test env is set up as below:
> >
> > root@debian-i386:/home/zwu# uname -a
> > Linux debian-i386 3.7.0-rc8+ #266 SMP Tue Dec 4 12:17:55 CST 2012 x86_64
> > GNU/Linux
> >
> > root@debian-i386:/home/zwu# mkfs.xfs -f -l
> > size=1310b,sunit=8 /home/zwu/bdev.img
> > meta-data=/home/zwu/bdev.img     isize=256    agcount=4, agsize=128000
> > blks
> >          =                       sectsz=512   attr=2, projid32bit=0
> > data     =                       bsize=4096   blocks=512000, imaxpct=25
> >          =                       sunit=0      swidth=0 blks
> > naming   =version 2              bsize=4096   ascii-ci=0
> > log      =internal log           bsize=4096   blocks=1310, version=2
> >          =                       sectsz=512   sunit=1 blks, lazy-count=1
> > realtime =none                   extsz=4096   blocks=0, rtextents=0
> >
> > 1.) original kernel
> >
> > root@debian-i386:/home/zwu# mount -o
> > loop,logbsize=256k /home/zwu/bdev.img /mnt/scratch
> > [ 1197.421616] XFS (loop0): Mounting Filesystem
> > [ 1197.567399] XFS (loop0): Ending clean mount
> > root@debian-i386:/home/zwu# mount
> > /dev/sda1 on / type ext3 (rw,errors=remount-ro)
> > tmpfs on /lib/init/rw type tmpf
''')

add("h2f01", {"From": "Benjamin Herrenschmidt <unknown@heldout.invalid>", "Date": "Thu, 02 Mar 2017 00:16:22 EST",
              "Subject": "Re: Regression in 4.11 - PowerPC crashes on boot, bisected to commit 5657933dbb6e"}, '''
On Wed, 2017-03-01 at 21:26 -0600, Larry Finger wrote:
> My Powerbook G4 Aluminum generates a fatal splat early in the boot process, just\u00c2
> after identifying the driver for the disk. Unfortunately, it turns off almost\u00c2
> immediately, thus I cannot report the message. After this bug has been\u00c2
> triggered, the system clock has been reset to Dec. 31, 1969. I assume this is a\u00c2
> side effect of an uncontrolled DMA operation.
>
> This problem has been bisected to commit 5657933dbb6e ("treewide: Move dma_ops\u00c2
> from struct dev_archdata into struct device").

Side effect of a crash during boot... the PMU gets upset when we crash while
there's a request in flight, that's probably what is happening.

As to why that commit is broken, I don't have time to look into it right now,
maybe next week of nobody beats me to it.

Cheers,
Ben.
''')

add("h2f02", {"From": "unknown <unknown@heldout.invalid>"}, r'''
Finally! After another 50+ compilations a have it! It took some time as
first I had to find a reason why some revisions did not boot (almost 2/3
were unbootable and the first bad commit was among them). Having this
solved I have been able to bisect without "skipping". The result is
surprising (at least for me) - believe it or not, the first bad commit
is 6610e089 "RTC: Rework RTC code to use timerqueue for events" from
John Stultz (I am sending him a copy of this message).
I would never expect this would be a problem, but my understanding of
this commit is very limited, so I am certainly missing the point.
However, I have tried to compile 2.6.38 (which was "bad") with "Real
Time Clock" configuration option turned off and it behaves "normally"
then (= is "good").
Huh. That's *very* odd. Is your system doing anything in-particular
with the RTC? I don't have a clue right off, so probably the next step
Yes, it is very odd. The system does not do anything special with RTC.
It is a diskless computational workstation.
is doing a bit of instrumentation to try to figure out where exactly we
trigger the behavior. Could you checkout commit 6610e089 and apply the
patch below to see if we can't narrow it down?
With the patch applied the system does not show the strange behavior (=
is "good").
Could you also send your .config to me?
Sure. It is attached. I have found that if I turn CONFIG_RTC_DRV_CMOS
off, the system behaves normally (= is "good") too.
Yea. My rough guess is that the BIOS is somehow sensitive to how the
CMOS RTC is touched.
Does disabling CONFIG_HPET_EMULATE_RTC change the behavior?
''')

add("h2f03", {"From": "Stuart Little <unknown@heldout.invalid>", "Date": "Fri, 07 Feb 2020 21:03:00 EST",
              "Subject": "Re: PROBLEM: Linux 5.5 fails to load firmware for Intel(R) Dual Band Wireless AC 3168"}, r'''
I have done the bisect on this issue. The log is attached, along with the end summary the bisect returned. The latter is also pasted here:

--- cut here ---

b3f20e098293892388d6a0491d6bbb2efb46fbff is the first bad commit
commit b3f20e098293892388d6a0491d6bbb2efb46fbff
Author: Luca Coelho <luciano.coelho@xxxxxxxxx>
Date: Mon Nov 25 13:21:58 2019 +0200

iwlwifi: mvm: fix NVM check for 3168 devices

We had a check on !NVM_EXT and then a check for NVM_SDP in the else
block of this if. The else block, obviously, could only be reached if
using NVM_EXT, so it would never be NVM_SDP.

Fix that by checking whether the nvm_type is IWL_NVM instead of
checking for !IWL_NVM_EXT to solve this issue.

Reported-by: Stefan Sperling <stsp@xxxxxxxxx>
Signed-off-by: Luca Coelho <luciano.coelho@xxxxxxxxx>

:040000 040000 923b8f7ba8a5826190d4b1b52a00a2fca0304687 529cfe362357c9ec6d411a687d9e41ac86a94d91 M drivers

--- end ---

On Fri, Feb 07, 2020 at 08:09:03PM -0500, Stuart Little wrote:
> I am on an
>
> Intel(R) Core(TM) i7-7500U CPU @ 2.70GHz
>
> with an Intel wifi card:
>
> Intel(R) Dual Band Wireless AC 3168, REV=0x220
>
> The machine is running Slackware 14.2 with a custom-compiled 5.5 kernel (from source; commit d5226fa6dbae Linux 5.5).
>
> The issue:
>
> Booting into that kernel results in failure to load the wifi card firmware. The relevant dmesg portion is attached (these are all of the lines containing 'iwlwifi').
>
> I have checked that it breaks between
>
> def9d2780727 Linux 5.5-rc7 (good)
>
> and
>
> d5226fa6dbae Linux 5.5 (bad)
>
> I will attempt a bisect to track down the precise faulty commit, but this is all I have for now. Please let me know if I can provide more info short of the bisect.
>
> P.S.
>
> I have checked that the very latest commit at the time of this writing (41dcd67e88688afbeb3b2bd23960eed5daec74e7 at Fri Feb 
''')

add("h2f04", {"From": "unknown <unknown@heldout.invalid>"}, r'''
Hi all. I'm a happy owner of a Dell XPS 1530 laptop where I use an external mouse and usually keep the internal touchpad disabled. Fedora bugzilla link: https://bugzilla.redhat.com/show_bug.cgi?id=448656 The bugzilla entry has more text, but I've tried to distil the info here so one doesn't have to wade over several pages of postings in order to get to the info. Kristian Högsberg Cc'd as he's the assigned redhat resource for that particular bug. The problem: Some time ago (I'm not sure when as I've been suspending the computer rather than rebooting it) I started noticing that I got some really weird input from the keyboard without me pressing any keys. The most frequently "fake-pressed" key is the equivalent of F7 (^[[18~). It seems to always generate escape-sequences similar to those of pressing either of the F-keys for some reason (not a blessing when 14000 help-browser windows suddenly try to spawn after the touchpad generating F1 sequences under Gnome). The mouse-pointer also jumps around the screen like a wild monkey randomly activating left or right button at near-tachyon speed. So far I haven't noticed it scrolling or middle-clicking. The troubleshooting: At first I thought it was the motherboard acting up (and got it replaced as it actually broke down 4 days after the problems started). After that I upgraded from Fedora 8 to Fedora 9, and none of the fedora9-shipped kernels work. Suspecting the technician was a bit clumsy or perhaps managed to short-circuit the touchpad, I loaded up Windows Vista, which works perfectly, ruling out hardware errors. Unfortunately, I need this laptop for more than watching porn and playing games, so running vista isn't really an option. I've tried booting latest master from linux-input.git (eff88f9927b8a54b378b4d4863eef488612b6dd7, v2.6.26-rc9-80-geff88f9 as of this writing), but to no avail. Finally, I located an ancient kernel (2.6.23.1-42) that doesn't have this particular problem but exhibits a much more common and less se
''')

add("h2n01", {"From": "Peng Zhang <unknown@heldout.invalid>"}, r'''
在 2023/11/28 21:55, kernel test robot 写道:
Hello, kernel test robot noticed a 94.7% improvement of will-it-scale.per_process_ops on: commit: 6e553c6bcb7746abad29ce63e0cb7a18348e88fb ("fork: use __mt_dup() to duplicate maple tree in dup_mmap()") https://git.kernel.org/cgit/linux/kernel/git/next/linux-next.git master testcase: will-it-scale test machine: 104 threads 2 sockets (Skylake) with 192G memory parameters: nr_task: 100% mode: process test: brk2 cpufreq_governor: performance Details are as below: --------------------------------------------------------------------------------------------------> The kernel config and materials to reproduce are available at: https://download.01.org/0day-ci/archive/20231128/202311282145.ff13737b-oliver.sang@xxxxxxxxx ========================================================================================= compiler/cpufreq_governor/kconfig/mode/nr_task/rootfs/tbox_group/test/testcase: gcc-12/performance/x86_64-rhel-8.3/process/100%/debian-11.1-x86_64-20220510.cgz/lkp-skl-fpga01/brk2/will-it-scale commit: ec81deb6b7 ("maple_tree: preserve the tree attributes when destroying maple tree") 6e553c6bcb ("fork: use __mt_dup() to duplicate maple tree in dup_mmap()") ec81deb6b769dc1b 6e553c6bcb7746abad29ce63e0c ---------------- --------------------------- %stddev %change %stddev \ | \ 24.47 -7.2 17.29 mpstat.cpu.all.soft% 8.76 +7.6 16.36 mpstat.cpu.all.usr% 8.80 +85.5% 16.33 vmstat.cpu.us 7732 -18.3% 6318 vmstat.system.cs 13467005 +94.7% 26223847 will-it-scale.104.processes 129489 +94.7% 252151 will-it-scale.per_process_ops 13467005 +94.7% 26223847 will-it-scale.workload 1.792e+08 -13.6% 1.549e+08 numa-numastat.node0.local_node 1.793e+08 -13.6% 1.549e+08 numa-numastat.node0.numa_hit 1.867e+08 -12.6% 1.631e+08 numa-numastat.node1.local_node 1.867e+08 -12.6% 1.632e+08 numa-numastat.node1.numa_hit 1.793e+08 -13.6% 1.549e+08 numa-vmstat.node0.numa_hit 1.792e+08 -13.6% 1.549e+08 numa-vmstat.node0.numa_local 1.867e+08 -12.6% 1.631e+08 numa-v
''')

add("h2n02", {"From": "Linus Torvalds <torvalds@linux-foundation.org>",
              "Subject": 'Revert "SLUB: Alternate fast paths using cmpxchg_local"'}, r'''
This reverts commit 1f84260c8ce3b1ce26d4c1d6dedc2f33a3a29c0c, which is
suspected to be the reason for some very occasional and hard-to-trigger
crashes that usually look related to memory allocation (mostly reported
in networking, but since that's generally the most common source of
shortlived allocations - and allocations in interrupt contexts - that in
itself is not a big clue).

See for example
	http://bugzilla.kernel.org/show_bug.cgi?id=9973
	http://lkml.org/lkml/2008/2/19/278
etc.

One promising suspicion for what the root cause of bug is (which also
explains why it's so hard to trigger in practice) came from Eric
Dumazet:

   "I wonder how SLUB_FASTPATH is supposed to work, since it is affected
    by a classical ABA problem of lockless algo.

    cmpxchg_local(&c->freelist, object, object[c->offset]) can succeed,
    while an interrupt came (on this cpu), and several allocations were
    done, and one free was performed at the end of this interruption, so
    'object' was recycled.

    c->freelist can then contain the previous value (object), but
    object[c->offset] was changed by IRQ.

    We then put back in freelist an already allocated object."

but another reason for the revert is simply that everybody agrees that
this code was the main suspect just by virtue of the pattern of oopses.

Cc: Torsten Kaiser <just.for.lkml@googlemail.com>
Cc: Christoph Lameter <clameter@sgi.com>
Cc: Mathieu Desnoyers <mathieu.desnoyers@polymtl.ca>
Cc: Pekka Enberg <penberg@cs.helsinki.fi>
Cc: Ingo Molnar <mingo@elte.hu>
Cc: Eric Dumazet <dada1@cosmosbay.com>
Signed-off-by: Linus Torvalds <torvalds@linux-foundation.org>
''')

add("h2n03", {"From": "Chao S <unknown@heldout.invalid>", "Date": "Tue, 23 Jun 2026 15:28:49 -0700",
              "Subject": "[PATCH] nvme: bound the freeze drain in passthrough commands"}, r'''
Hi Keith, Christoph,

Both questions land on the same point, so one answer below.

Keith wrote:
> The IO timeout callbacks that nvme drivers provide are supposed to
> forcefully reclaim any IO no matter what state the device is in. Is
> that not happening for some reason?

Christoph wrote:
> Note that the blocked message itself is not a problem, but around
> this time we should have done a controller reset and fixed up the
> issue.  Does that not happen for your test case?

It did happen.  nvme_io_timeout was the default 30, and the relevant
dmesg from the campaign that produced the hung-task report:

  [ 44.220408] nvme nvme0: I/O tag 451 opcode 0x2 (Read) QID 1 timeout, aborting
  [ 44.220798] nvme nvme0: I/O tag 819 opcode 0x1 (Write) QID 1
timeout, aborting
  [ 44.220820] nvme nvme0: Abort status: 0x0
  [ 44.221286] nvme nvme0: Abort status: 0x0
  [ 45.591197] nvme nvme0: resetting controller
  [ 46.307151] nvme nvme0: IO queues lost
  [...100s of silence...]
  [144.561596] INFO: task systemd-udevd:134 blocked for more than 123 seconds.

Timeout fires, abort is accepted, reset starts, reset reaches the
"IO queues lost" branch (drivers/nvme/host/pci.c).  Then nvme_reset_work
itself blocks at

  nvme_mark_namespaces_dead -> blk_mark_disk_dead -> blk_report_disk_dead
    -> bdev_mark_dead(bdev, true) -> sync_blockdev -> folio_wait_writeback

i.e. the unconditional sync_blockdev in bdev_mark_dead's bare-bdev
else-branch (block/bdev.c) is itself waiting on the writeback that the
reset was supposed to drain.  The reset_work kworker doesn't show in
this dmesg because it crosses the 123s threshold ~25s after the
snapshot console was cut.

So in this report, the IO timeout did its job, but the reset that the
timeout kicks off cannot complete, and nvme_passthru_start (which is
already in nvme_wait_freeze at this point) has no way to back out.

Two reas
''')

add("h2n04", {"From": "Maurizio Lombardi <unknown@heldout.invalid>", "Date": "Mon, 13 Apr 2026 02:21:45 -0700",
              "Subject": "[PATCH V3 0/8] nvme: Refactor and expose per-controller timeout configuration"}, r'''
On Mon Apr 13, 2026 at 10:12 AM CEST, Hannes Reinecke wrote:
> On 4/10/26 09:39, Maurizio Lombardi wrote:
>> This patchset tries to address some limitations in how the NVMe driver handles
>> command timeouts.
>> Currently, the driver relies heavily on global module parameters
>> (NVME_IO_TIMEOUT and NVME_ADMIN_TIMEOUT), making it difficult for users to
>> tune timeouts for specific controllers that may have very different
>> characteristics. Also, in some cases, manual changes to sysfs timeout values
>> are ignored by the driver logic.
>> 
>> For example this patchset removes the unconditional timeout assignment in
>> nvme_init_request. This allows the block layer to correctly apply the request
>> queue's timeout settings, ensuring that user-initiated changes via sysfs
>> are actually respected for all requests.
>> 
>> It introduces new sysfs attributes (admin_timeout and io_timeout) to the NVMe
>> controller. This allows users to configure distinct timeout requirements for
>> different controllers rather than relying on global module parameters.
>> 
> What about KATO?
> With this patchset the user can set arbitrary values to the I/O timeout,
> which easily can be lower than KATO.

it's worth noting that unless I am missing something the user can already
trigger this exact scenario today by setting an I/O timeout lower than KATO,
using the global nvme_io_timeout module parameter. 

> And as per spec a KATO timeout implies a transport disruption, requiring
> a controller reset.
> But due to the internal design of the nvme error handling we do conflate
> transport disruption and command timeout, so an _I/O_ timeout triggers
> a controller reset.

this is true only for TCP and RDMA host drivers,
because PCI and FC already support I/O aborts.

Apple doesn't support abort, but it's not clear in the comments if it's
the dri
''')

add("h2n05", {"From": "Pan Deng <unknown@heldout.invalid>",
              "Subject": "[PATCH 4/4] sched/rt: Split cpupri_vec->cpumask to per NUMA node to reduce contention"}, r'''
When running a multi-instance FFmpeg workload on HCC system, significant
contention is observed on bitmap of `cpupri_vec->cpumask`.

The SUT is a 2-socket machine with 240 physical cores and 480 logical
CPUs. 60 FFmpeg instances are launched, each pinned to 4 physical cores
(8 logical CPUs) for transcoding tasks. Sub-threads use RT priority 99
with FIFO scheduling. FPS is used as score.

perf c2c tool reveals:
cpumask (bitmap) cache line of `cpupri_vec->mask`:
- bits are loaded during cpupri_find
- bits are stored during cpupri_set
- cycles per load: ~2.2K to 8.7K

This change splits `cpupri_vec->cpumask` into per-NUMA-node data to
mitigate false sharing.

As a result:
- FPS improves by ~3.8%
- Kernel cycles% drops from ~20% to ~18.7%
- Cache line contention is mitigated, perf-c2c shows cycles per load
  drops from ~2.2K-8.7K to ~0.5K-2.2K

Note: CONFIG_CPUMASK_OFFSTACK=n remains unchanged.

Appendix:
1. Perf c2c report of `cpupri_vec->mask` bitmap cache line:
-------  -------  ------  ------  ------  ------  ------------------------
 Rmt      Lcl     Store   Data    Load    Total    Symbol
Hitm%    Hitm%   L1 Hit%  offset  cycles  records
-------  -------  ------  ------  ------  ------  ------------------------
 155       39       39    0xff14d52c4682d800
-------  -------  ------  ------  ------  ------  ------------------------
43.23%   43.59%    0.00%  0x0     3489    415   _find_first_and_bit
 3.23%    5.13%    0.00%  0x0     3478    107   __bitmap_and
 3.23%    0.00%    0.00%  0x0     2712    33    _find_first_and_bit
 1.94%    0.00%    7.69%  0x0     5992    33    cpupri_set
 0.00%    0.00%    5.13%  0x0     3733    19    cpupri_set
12.90%   12.82%    0.00%  0x8     3452    297 
''')

add("h2n06", {"From": "Jeff Layton <unknown@heldout.invalid>", "Subject": "Re: [v1] shmem: stable directory cookies"}, r'''
On Mon, 2023-04-17 at 15:23 -0400, Chuck Lever wrote:
> From: Chuck Lever <chuck.lever@oracle.com>
> 
> The current cursor-based directory cookie mechanism doesn't work
> when a tmpfs filesystem is exported via NFS. This is because NFS
> clients do not open directories: each READDIR operation has to open
> the directory on the server, read it, then close it. The cursor
> state for that directory, being associated strictly with the opened
> struct file, is then discarded.
> 
> Directory cookies are cached not only by NFS clients, but also by
> user space libraries on those clients. Essentially there is no way
> to invalidate those caches when directory offsets have changed on
> an NFS server after the offset-to-dentry mapping changes.
> 
> The solution we've come up with is to make the directory cookie for
> each file in a tmpfs filesystem stable for the life of the directory
> entry it represents.
> 
> Add a per-directory xarray. shmem_readdir() uses this to map each
> directory offset (an loff_t integer) to the memory address of a
> struct dentry.
> 
> Signed-off-by: Chuck Lever <chuck.lever@oracle.com>
> ---
>  include/linux/shmem_fs.h |    2 
>  mm/shmem.c               |  213 +++++++++++++++++++++++++++++++++++++++++++---
>  2 files changed, 201 insertions(+), 14 deletions(-)
> 
> Changes since RFC:
> - Destroy xarray in shmem_destroy_inode() instead of free_in_core_inode()
> - A few cosmetic updates
''')

add("h2n07", {"From": "Theodore Y. Ts'o <unknown@heldout.invalid>", "Date": "Sat, 09 Jun 2018 21:51:37 EST",
              "Subject": "Re: what trees/branches to test on syzbot"}, r'''
On Sat, Jun 09, 2018 at 03:17:21PM -0700, Linus Torvalds wrote:
> I think it would be lovely to get linux-next back eventually, but it
> sounds like it's just too noisy right now, and yes, we should have a
> baseline for the standard tree first.
>
> But once there's a "this is known for the baseline", I think adding
> linux-next back in and then maybe even have linux-next simply just
> kick out trees that cause problems would be a good idea.
>
> Right now linux-next only kicks things out based on build issues (or
> extreme merge issues), afaik. But it *would* be good to also have
> things like syzbot do quality control on linux-next.

Syzbot is always getting improved to find new classes of problems. So
the only way to get a baseline would be to use an older version of
syzbot for linux-next, and to have it suppress sending e-mails about
failures that are duplicates that were already found via the mainline
tree.

Then periodically, once version N has run for M weeks, and has spewed
some large number of new failures to LKML, then you could promote
version N to be run against linux-next, and so hopefully the only
thing it would report against linux-next are regressions, and not
duplicates of new bugs also being found via the latest and greatest
version of syzbot being run against the mainline kernel.

- Ted
''')

add("h2n08", {"From": "unknown <unknown@heldout.invalid>"}, r'''
You are not comparing like with like. Much of your speed difference
from kbuild 2.4 to 2.5 is because you have omitted the make dep time.
kbuild 2.5 does not have a seperate make dep pass. Instead it checks
the dependencies every time, during phase4.
Checking the dependencies only once in kbuild 2.4 is a very common
source of build error. Users change their code, forget to rerun make
dep then wonder why their kernel and module build is broken. In your
case, you "know" that your change does not affect the dependencies so
you omit the make dep run. That is the equivalent of bypassing the
integrity checks in kbuild 2.5, i.e. it is the equivalent of
NO_MAKEFILE_GEN=1.
Also you specified make modules. You are bypassing all the checks to
see if any part of the main kernel needs to be rebuilt because of your
changes. Whether that bypass is correct or not is unknown, you are
asserting that it is and bypassing the dependency checks on the rest of
the kernel. BTW, if you have a lot of modules you will find that your
make modules time in 2.4 is significantly higher than the times you
quoted.
So you found a case that appears to make kbuild 2.4 faster than 2.5.
You did it by omitting the kbuild 2.4 step that does integrity checking
and by specifying command line options that bypass most of the build.
The result is that you are comparing an inaccurate 2.4 build against an
accurate 2.5 build.
I have never considered "fast but inaccurate" to be a sensible default
goal for a kernel build. If you want that, use NO_MAKEFILE_GEN=1.
-
To unsubscribe from this list: send the line "unsubscribe linux-kernel" in
the body of a message to majordomo@vger.kernel.org
More majordomo info at http://vger.kernel.org/majordomo-info.html
Please read the FAQ at http://www.tux.org/lkml/
''')

add("h2n09", {"From": "Arazil Songweaver <unknown@heldout.invalid>", "Date": "Wed, 22 May 2024 13:34:17 EST",
              "Subject": "Re: BUG: Framework Laptop 16 i2c-hid Based Touchpad Sometimes Fails To Initialize Properly On Early Boot"}, r'''
I was able to reproduce this bug on kernel 6.6.0 which should rule out a recent regression. Kernel 6.5.0 refused to start with a modules error. Going earlier than that is probably pointless given that we are talking about hardware first released in January 2024.

This issue is also on the kernel.org Bugzilla at: 218836

-Arazil

On 5/21/24 8:44 AM, Linux regression tracking (Thorsten Leemhuis) wrote:
On 21.05.24 15:31, Arazil Songweaver wrote:
I was able to reproduce bug again with: Linux version
6.9.0-1-git-10323-g8f6a15f095a6 (linux-git@archlinux) (gcc (GCC) 14.1.1
20240507, GNU ld (GNU Binutils) 2.42.0) #1 SMP PREEMPT_DYNAMIC Tue, 21
May 2024 11:58:24 +0000 (not an official Arch Linux package)

The relevant I2C_HID module needs to be built in to the kernel for the
bug to trigger on a consistent basis. Arch Linux and mkinitcpio is
currently getting around this issue by building I2C_HID as a module and
delaying the load of that module until the part when autoprobe starts
loading relevant kernel modules. The bug became (more) visible on Arch
Linux after an update to mkinitcpio moved the I2C_HID module up to the
beginning of the boot process.

This is not a recent regression. In my testing, I was able to reproduce
this issue as far back as version 6.8. I did not test 6.7 or earlier
revisions yet.
Okay, then I won't track this as a regression; might still be worth
trying a few older kernels in a spare minute to see if it was introduced
in the last 12 or 18 months and can be bisected.

CCed Jiri and Benjamin nevertheless in case they missed this report on
the lists.

Ciao, Thorsten

On 5/21/24 5:57 AM, Linux regression tracking (Thorsten Leemhuis) wrote:
On 14.05.24 04:57, Arazil Songweaver wrote:
We are experiencing an issue where the touch pad on the Framework Laptop
16 fails to initialize properly wh
''')

add("h2n10", {"From": "Matthew Wilcox (Oracle) <unknown@heldout.invalid>"}, r'''
We have a 3x throughput improvement reported by Intel's kernel test robot: https://lore.kernel.org/all/202404261055.c5e24608-oliver.sang@xxxxxxxxx/ This is from delaying taking the mmap_lock for page faults until we actually need the mmap_lock in order to assign an anon_vma to the vma. It cleans up the page fault path a little by making the anon fault handler more similar to the file fault handler. Matthew Wilcox (Oracle) (4): mm: Assert the mmap_lock is held in __anon_vma_prepare() mm: Delay the check for a NULL anon_vma mm: Fix some minor per-VMA lock issues in userfaultfd mm: Optimise vmf_anon_prepare() for VMAs without an anon_vma mm/huge_memory.c | 6 ++++-- mm/memory.c | 42 +++++++++++++++++++++++++++--------------- mm/rmap.c | 3 +-- mm/userfaultfd.c | 20 +++++++++----------- 4 files changed, 41 insertions(+), 30 deletions(-) -- 2.43.0
''')

add("h2n11", {"From": "Max Kellermann <unknown@heldout.invalid>"}, r'''
This eliminates several redundant atomic reads and therefore reduces
the duration the surrounding spinlocks are held.
In several io_uring benchmarks, this reduced the CPU time spent in
queued_spin_lock_slowpath() considerably:
io_uring benchmark with a flood of `IORING_OP_NOP` and `IOSQE_ASYNC`:
38.86% -1.49% [kernel.kallsyms] [k] queued_spin_lock_slowpath
6.75% +0.36% [kernel.kallsyms] [k] io_worker_handle_work
2.60% +0.19% [kernel.kallsyms] [k] io_nop
3.92% +0.18% [kernel.kallsyms] [k] io_req_task_complete
6.34% -0.18% [kernel.kallsyms] [k] io_wq_submit_work
HTTP server, static file:
42.79% -2.77% [kernel.kallsyms] [k] queued_spin_lock_slowpath
2.08% +0.23% [kernel.kallsyms] [k] io_wq_submit_work
1.19% +0.20% [kernel.kallsyms] [k] amd_iommu_iotlb_sync_map
1.46% +0.15% [kernel.kallsyms] [k] ep_poll_callback
1.80% +0.15% [kernel.kallsyms] [k] io_worker_handle_work
HTTP server, PHP:
35.03% -1.80% [kernel.kallsyms] [k] queued_spin_lock_slowpath
0.84% +0.21% [kernel.kallsyms] [k] amd_iommu_iotlb_sync_map
1.39% +0.12% [kernel.kallsyms] [k] _copy_to_iter
0.21% +0.10% [kernel.kallsyms] [k] update_sd_lb_stats
Signed-off-by: Max Kellermann <max.kellermann@xxxxxxxxx>
''')

add("h2n12", {"From": "Zhi Yong Wu <wuzhy@...ux.vnet.ibm.com>", "Date": "Thu, 06 Dec 2012 11:28:18 +0800",
              "Subject": "Re: [PATCH v1 resend hot_track 00/16] vfs: hot data tracking",
              "Message-ID": "<1354764503.16424.43.camel@f15>"}, r'''
HI, guys

THe perf testing is done separately with fs_mark, fio, ffsb and
compilebench in one kvm guest.

Below is the performance testing report for hot tracking, and no obvious
perf downgrade is found.

Note: original kernel means its source code is not changed;
      kernel with enabled hot tracking means its source code is with hot
tracking patchset.

The test env is set up as below:

root@...ian-i386:/home/zwu# uname -a
Linux debian-i386 3.7.0-rc8+ #266 SMP Tue Dec 4 12:17:55 CST 2012 x86_64
GNU/Linux

root@...ian-i386:/home/zwu# mkfs.xfs -f -l
size=1310b,sunit=8 /home/zwu/bdev.img
meta-data=/home/zwu/bdev.img     isize=256    agcount=4, agsize=128000
blks
         =                       sectsz=512   attr=2, projid32bit=0
data     =                       bsize=4096   blocks=512000, imaxpct=25
         =                       sunit=0      swidth=0 blks
naming   =version 2              bsize=4096   ascii-ci=0
log      =internal log           bs
''')

add("h2n13", {"From": "Peter Zijlstra <unknown@heldout.invalid>"}, r'''
> Note that PeterZ was struggling with intermittent boot hangs yesterday as 
> well, 
> which hangs came and went during severeal (fruitless) bisection attempts. 
> Then at 
> a certain point the hangs went away altogether.
> The symptoms for both his and your hangs are consistent with an alignment 
> dependent bug.

Mine would consistently hang right after

  "Freeing SMP alternatives memory: 44K"

At one point I bisected it to commit:

  a06cc94f3f8d ("x86/build: Drop superfluous ALIGN from the linker script")

But shortly thereafter I started having trouble reproducing, and now I
can run kernels that before would consistently fail to boot :/

> My other guess is that it's perhaps somehow microcode related?

I did not update or otherwise change packages while I was bisecting; the
machine is:

vendor_id       : GenuineIntel
cpu family      : 6
model           : 62
model name      : Intel(R) Xeon(R) CPU E5-2680 v2 @ 2.80GHz
stepping        : 4
microcode       : 0x428

Like I wrote on IRC; what _seems_ to have 'cured' things is clearing out
my /boot. The amount of kernels generated by the bisect was immense and
running 'update-grub' was taking _much_ longer than actually building a
new kernel.

What I have not tried is again generating and installing that many
kernels to see if that will make it go 'funny' again.
''')

add("h2n14", {"From": "Benjamin Tissoires <unknown@heldout.invalid>", "Date": "Thu, 20 Nov 2014 14:42:17 EST",
              "Subject": "Re: [PATCH 1/2] Input: synaptics: Use in-kernel tracking for reporting mt data"}, r'''
On Fri, Oct 31, 2014 at 12:51 PM, Dmitry Torokhov
<dmitry.torokhov@xxxxxxxxx> wrote:
> On Thu, Oct 30, 2014 at 02:33:06PM -0400, Benjamin Tissoires wrote:
>> The current code tries to consider all states and transitions to properly
>> detect which finger is attached to which slot. The code is quite huge
>> and difficult to read.
>> If the sensor manages to group the touch points but is not reliable in
>> giving tracking ids, we can simply use the kernel tracking method. Note
>> that it is already used by Cr-48 Chromebooks.
>>
>> Incidentaly, this fixes a bug reported by Peter Hutterer:
>> """
>> on the Lenovo T440, run:
>> evemu-record /dev/input/event4 | grep BTN_
>>
>> then put one, two, three, two fingers down
>> when you go from 3 to 2 fingers the driver sends a spurious BTN_TOUCH 0
>> event:
>>
>> E: 0.000000 0001 014a 0001 # EV_KEY / BTN_TOUCH 1
>> E: 0.000000 0001 0145 0001 # EV_KEY / BTN_TOOL_FINGER 1
>> E: 0.770008 0001 0145 0000 # EV_KEY / BTN_TOOL_FINGER 0
>> E: 0.770008 0001 014d 0001 # EV_KEY / BTN_TOOL_DOUBLETAP 1
>> E: 1.924716 0001 014d 0000 # EV_KEY / BTN_TOOL_DOUBLETAP 0
>> E: 1.924716 0001 014e 0001 # EV_KEY / BTN_TOOL_TRIPLETAP 1
>>
>> .. changing from 3 to 2 fingers now
>>
>> E: 3.152641 0001 014a 0000 # EV_KEY / BTN_TOUCH 0
>> E: 3.152641 0001 014d 0001 # EV_KEY / BTN_TOOL_DOUBLETAP 1
>> E: 3.152641 0001 014e 0000 # EV_KEY / BTN_TOOL_TRIPLETAP 0
>> E: 3.176948 0001 014a 0001 # EV_KEY / BTN_TOUCH 1
>>
>> quick look in the kernel shows it's caused by hw.z going to 0 for a packet,
>> so probably a firmware bug. either way, it makes it hard to track BTN_TOUCH
>> as signal that at least one finger is down.
>> """
>>
>> The in-kernel tracking is enough to remove this spurious BTN_TOUCH 0.
>>
>> Signed-off-by: Benjamin Tissoires <benjamin.tissoires@xxxxxxxxxx>
>> ---
>>
>> Hi Dmitry,
>>
>> I started working on
''')


def main() -> None:
    for name, headers, body in MSGS:
        h = dict(headers)
        lines = []
        for k in ("From", "Date", "Subject"):
            if k in h:
                v = h[k]
                if any(ord(c) > 127 for c in v):
                    v = Header(v, "utf-8").encode()
                lines.append(f"{k}: {v}")
        lines.append(f"Message-ID: {h.get('Message-ID', f'<heldout2-{name}@heldout.invalid>')}")
        lines += ["MIME-Version: 1.0", "Content-Type: text/plain; charset=utf-8",
                  "Content-Transfer-Encoding: 8bit", ""]
        text = "\n".join(lines) + "\n" + body.lstrip("\n")
        (HERE / f"{name}.eml").write_bytes(text.encode("utf-8"))


if __name__ == "__main__":
    main()
