"""NVIDIA's NVSwitch SXids, as data: every SXid number of the driver's enum, how the driver tags its lines, and the
class and recovery NVIDIA's Fabric Manager user guide gives it. Over 300 lines: one table, kept whole so it can be
compared with its sources row by row.

Sources: the numbers and names, NVSWITCH_ERR_<name> in src/common/nvswitch/interface/ctrl_dev_nvswitch.h (NVIDIA/
open-gpu-kernel-modules 595.45.04; group bases such as 10000 left out); the tag, from the reporting macro each number
is logged with in src/common/nvswitch/kernel/{lr10,ls10}/*.c ("lr10": the A100 generation's NVSwitch, "ls10": H100's;
"Fatal if contained else Non-fatal" is NVSWITCH_REPORT_CONTAIN, intr_nvswitch.h; empty: no tagged report found); the
class, name and recovery, from the Fabric Manager user guide DU-09883-001 v1.3 (October 2023), sections "Non-Fatal
NVSwitch SXid Errors", "Fatal NVSwitch SXid Errors", "Always Fatal NVSwitch SXid Errors" and "Other Notable NVSwitch
SXid Errors", as leptonai/gpud transcribes it (components/accelerator/nvidia/sxid/sxid.go, which cites that version;
20009 is gpud's own addition, "gpud only"); "free": the driver also prints this number with a free text of its own
(NVSWITCH_PRINT_SXID without a Fatal/Non-fatal tag). NVIDIA: "SXid messages apply only to Hopper and earlier
generation GPUs" (docs.nvidia.com/deploy/xid-errors/introduction.html).
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE = "Fabric Manager user guide DU-09883-001 v1.3 (SXid tables); NVSWITCH_ERR_* in ctrl_dev_nvswitch.h (595.45.04)"

# The guide's recovery texts, by the short key the table uses.
RECOVERY: dict[str, str] = {
    "VM": "Restart the guest VM to see if the associated NVSwitch comes back up.",
    "HOST": "Restart the host to reset the entire fabric/system.",
    "NA": "Not Applicable.",
    "COOL": "Ensure that the system cooling is sufficient.",
    "LINK": "If this issue was not due to an uncoordinated shutdown, check link mechanical connections.",
    "RESET_ALL": "Reset all GPUs and all NVSwitches (refer to section D.9).",
    "RESET_ALL2": "To recover, it will require a reset to all GPUs and NVSwitches (refer to section D.9).",
    "GUEST": "Restart Guest VM.",
    "ACL": "Validate GPU/NVSwitch fabric partition routing information using the NVSwitch-audit tool. Restart the "
    "guest VM.",
    "": "",
}

# SXid|NVSWITCH_ERR_ name|the driver's tag [chips]|FM guide class|FM guide name|FM recovery key|free text
_TABLE = """\
10001|HW_HOST_PRIV_ERROR|Non-fatal (PRI) [lr10,ls10]; untagged; Severity 1 [lr10,ls10]|other notable|Host_priv_error||free
10002|HW_HOST_PRIV_TIMEOUT|Non-fatal (PRI) [lr10]|other notable|Host_priv_timeout||
10003|HW_HOST_UNHANDLED_INTERRUPT||other notable|Host_unhandled_interrupt|RESET_ALL2|free
10004|HW_HOST_THERMAL_EVENT_START||other notable|Host_thermal_event_start|COOL|free
10005|HW_HOST_THERMAL_EVENT_END||other notable|Host_thermal_event_end|COOL|free
10006|HW_HOST_THERMAL_SHUTDOWN|||||free
10007|HW_HOST_IO_FAILURE|||||free
10008|HW_HOST_FIRMWARE_INITIALIZATION_FAILURE|||||free
10009|HW_HOST_FIRMWARE_RECOVERY_MODE|||||free
10010|HW_HOST_TNVL_ERROR|||||free
11001|HW_NPORT_INGRESS_CMDDECODEERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|ingress invalid command|VM|
11002|HW_NPORT_INGRESS_BDFMISMATCHERR|||||
11003|HW_NPORT_INGRESS_BUBBLEDETECT|||||
11004|HW_NPORT_INGRESS_ACLFAIL|Non-fatal [lr10,ls10]|non-fatal|Ingress invalid ACL|ACL|
11005|HW_NPORT_INGRESS_PKTPOISONSET|||||
11006|HW_NPORT_INGRESS_ECCSOFTLIMITERR|||||
11007|HW_NPORT_INGRESS_ECCHDRDOUBLEBITERR|||||
11008|HW_NPORT_INGRESS_INVALIDCMD|||||
11009|HW_NPORT_INGRESS_INVALIDVCSET|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|ingress invalid VCSet|VM|
11010|HW_NPORT_INGRESS_ERRORINFO|||||
11011|HW_NPORT_INGRESS_REQCONTEXTMISMATCHERR|Non-fatal [lr10,ls10]||||
11012|HW_NPORT_INGRESS_NCISOC_HDR_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
11013|HW_NPORT_INGRESS_NCISOC_HDR_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|ingress header DBE|VM|
11014|HW_NPORT_INGRESS_ADDRBOUNDSERR|Non-fatal [lr10,ls10]||||
11015|HW_NPORT_INGRESS_RIDTABCFGERR|Non-fatal [lr10,ls10]||||
11016|HW_NPORT_INGRESS_RLANTABCFGERR|Non-fatal [lr10,ls10]||||
11017|HW_NPORT_INGRESS_REMAPTAB_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]||||
11018|HW_NPORT_INGRESS_RIDTAB_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|ingress RID DBE|VM|
11019|HW_NPORT_INGRESS_RLANTAB_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|ingress RLAN DBE|VM|
11020|HW_NPORT_INGRESS_NCISOC_PARITY_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|ingress control parity|VM|
11021|HW_NPORT_INGRESS_REMAPTAB_ECC_LIMIT_ERR|Non-fatal [ls10]|non-fatal|Single bit ECC errors|NA|
11022|HW_NPORT_INGRESS_RIDTAB_ECC_LIMIT_ERR|Non-fatal [ls10]|non-fatal|Single bit ECC errors|NA|
11023|HW_NPORT_INGRESS_RLANTAB_ECC_LIMIT_ERR|Non-fatal [ls10]|non-fatal|Single bit ECC errors|NA|
11024|HW_NPORT_INGRESS_ADDRTYPEERR|Non-fatal [lr10,ls10]||||
11025|HW_NPORT_INGRESS_EXTAREMAPTAB_INDEX_ERR|Non-fatal [ls10]||||
11026|HW_NPORT_INGRESS_EXTBREMAPTAB_INDEX_ERR|Non-fatal [ls10]||||
11027|HW_NPORT_INGRESS_MCREMAPTAB_INDEX_ERR|Non-fatal [ls10]||||
11028|HW_NPORT_INGRESS_EXTAREMAPTAB_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
11029|HW_NPORT_INGRESS_EXTBREMAPTAB_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
11030|HW_NPORT_INGRESS_MCREMAPTAB_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
11031|HW_NPORT_INGRESS_EXTAREMAPTAB_REQCONTEXTMISMATCHERR|Non-fatal [ls10]||||
11032|HW_NPORT_INGRESS_EXTBREMAPTAB_REQCONTEXTMISMATCHERR|Non-fatal [ls10]||||
11033|HW_NPORT_INGRESS_MCREMAPTAB_REQCONTEXTMISMATCHERR|Non-fatal [ls10]||||
11034|HW_NPORT_INGRESS_EXTAREMAPTAB_ACLFAIL|Non-fatal [ls10]||||
11035|HW_NPORT_INGRESS_EXTBREMAPTAB_ACLFAIL|Non-fatal [ls10]||||
11036|HW_NPORT_INGRESS_MCREMAPTAB_ACLFAIL|Non-fatal [ls10]||||
11037|HW_NPORT_INGRESS_EXTAREMAPTAB_ADDRBOUNDSERR|Non-fatal [ls10]||||
11038|HW_NPORT_INGRESS_EXTBREMAPTAB_ADDRBOUNDSERR|Non-fatal [ls10]||||
11039|HW_NPORT_INGRESS_MCREMAPTAB_ADDRBOUNDSERR|Non-fatal [ls10]||||
11040|HW_NPORT_INGRESS_EXTAREMAPTAB_ECC_LIMIT_ERR|Non-fatal [ls10]||||
11041|HW_NPORT_INGRESS_EXTBREMAPTAB_ECC_LIMIT_ERR|Non-fatal [ls10]||||
11042|HW_NPORT_INGRESS_MCREMAPTAB_ECC_LIMIT_ERR|Non-fatal [ls10]||||
11043|HW_NPORT_INGRESS_MCCMDTOUCADDRERR|Non-fatal [ls10]||||
11044|HW_NPORT_INGRESS_READMCREFLECTMEMERR|Non-fatal [ls10]||||
11045|HW_NPORT_INGRESS_EXTAREMAPTAB_ADDRTYPEERR|Non-fatal [ls10]||||
11046|HW_NPORT_INGRESS_EXTBREMAPTAB_ADDRTYPEERR|Non-fatal [ls10]||||
11047|HW_NPORT_INGRESS_MCREMAPTAB_ADDRTYPEERR|Non-fatal [ls10]||||
12001|HW_NPORT_EGRESS_EGRESSBUFERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress crossbar overflow|VM|
12002|HW_NPORT_EGRESS_PKTROUTEERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress packet route|VM|
12003|HW_NPORT_EGRESS_ECCSINGLEBITLIMITERR0|||||
12004|HW_NPORT_EGRESS_ECCHDRDOUBLEBITERR0|||||
12005|HW_NPORT_EGRESS_ECCDATADOUBLEBITERR0|||||
12006|HW_NPORT_EGRESS_ECCSINGLEBITLIMITERR1|||||
12007|HW_NPORT_EGRESS_ECCHDRDOUBLEBITERR1|||||
12008|HW_NPORT_EGRESS_ECCDATADOUBLEBITERR1|||||
12009|HW_NPORT_EGRESS_NCISOCHDRCREDITOVFL|||||
12010|HW_NPORT_EGRESS_NCISOCDATACREDITOVFL|||||
12011|HW_NPORT_EGRESS_ADDRMATCHERR|||||
12012|HW_NPORT_EGRESS_TAGCOUNTERR|||||
12013|HW_NPORT_EGRESS_FLUSHRSPERR|||||
12014|HW_NPORT_EGRESS_DROPNPURRSPERR|Fatal if contained else Non-fatal [ls10]; Non-fatal [lr10]||||
12015|HW_NPORT_EGRESS_POISONERR|||||
12016|HW_NPORT_EGRESS_PACKET_HEADER|||||
12017|HW_NPORT_EGRESS_BUFFER_DATA|||||
12018|HW_NPORT_EGRESS_NCISOC_CREDITS|||||
12019|HW_NPORT_EGRESS_TAG_DATA|||||
12020|HW_NPORT_EGRESS_SEQIDERR|Fatal if contained else Non-fatal [lr10,ls10]|always fatal|egress sequence ID error|HOST|
12021|HW_NPORT_EGRESS_NXBAR_HDR_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
12022|HW_NPORT_EGRESS_NXBAR_HDR_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress input ECC DBE error|VM|
12023|HW_NPORT_EGRESS_RAM_OUT_HDR_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
12024|HW_NPORT_EGRESS_RAM_OUT_HDR_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress output ECC DBE error|VM|
12025|HW_NPORT_EGRESS_NCISOCCREDITOVFL|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress credit overflow|VM|
12026|HW_NPORT_EGRESS_REQTGTIDMISMATCHERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress destination request ID error|VM|
12027|HW_NPORT_EGRESS_RSPREQIDMISMATCHERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress destination response ID error|VM|
12028|HW_NPORT_EGRESS_PRIVRSPERR|Non-fatal [lr10,ls10]|non-fatal|egress nonposted PRIV error|GUEST|
12029|HW_NPORT_EGRESS_HWRSPERR|Fatal if contained else Non-fatal [ls10]; Non-fatal [lr10]||||
12030|HW_NPORT_EGRESS_NXBAR_HDR_PARITY_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress control parity error|VM|
12031|HW_NPORT_EGRESS_NCISOC_CREDIT_PARITY_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress credit parity error|VM|
12032|HW_NPORT_EGRESS_NXBAR_FLITTYPE_MISMATCH_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|egress flit type mismatch|VM|
12033|HW_NPORT_EGRESS_CREDIT_TIME_OUT_ERR|Fatal if contained else Non-fatal [lr10,ls10]||||
12034|HW_NPORT_EGRESS_INVALIDVCSET_ERR|Fatal if contained else Non-fatal [ls10]||||
12035|HW_NPORT_EGRESS_NXBAR_SIDEBAND_PD_PARITY_ERR|Fatal if contained else Non-fatal [ls10]||||
12036|HW_NPORT_EGRESS_NXBAR_REDUCTION_HDR_ECC_LIMIT_ERR|Non-fatal [ls10]||||
12037|HW_NPORT_EGRESS_NXBAR_REDUCTION_HDR_ECC_DBE_ERR|Non-fatal [ls10]||||
12038|HW_NPORT_EGRESS_MCRSPCTRLSTORE_ECC_LIMIT_ERR|Non-fatal [ls10]||||
12039|HW_NPORT_EGRESS_MCRSPCTRLSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
12040|HW_NPORT_EGRESS_RBCTRLSTORE_ECC_LIMIT_ERR|Non-fatal [ls10]||||
12041|HW_NPORT_EGRESS_RBCTRLSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
12042|HW_NPORT_EGRESS_MCREDSGT_ECC_LIMIT_ERR|Non-fatal [ls10]||||
12043|HW_NPORT_EGRESS_MCREDSGT_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
12044|HW_NPORT_EGRESS_MCREDBUF_ECC_LIMIT_ERR|Non-fatal [ls10]||||
12045|HW_NPORT_EGRESS_MCREDBUF_ECC_DBE_ERR|Non-fatal [ls10]||||
12046|HW_NPORT_EGRESS_MCRSP_RAM_HDR_ECC_LIMIT_ERR|Non-fatal [ls10]||||
12047|HW_NPORT_EGRESS_MCRSP_RAM_HDR_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
12048|HW_NPORT_EGRESS_NXBAR_REDUCTION_HDR_PARITY_ERR|Non-fatal [ls10]||||
12049|HW_NPORT_EGRESS_NXBAR_REDUCTION_FLITTYPE_MISMATCH_ERR|Non-fatal [ls10]||||
12050|HW_NPORT_EGRESS_MCRSP_CNT_ERR|Non-fatal [ls10]||||
12051|HW_NPORT_EGRESS_RBRSP_CNT_ERR|Non-fatal [ls10]||||
13001|HW_NPORT_FSTATE_TAGPOOLBUFERR|||||
13002|HW_NPORT_FSTATE_CRUMBSTOREBUFERR|||||
13003|HW_NPORT_FSTATE_SINGLEBITECCLIMITERR_CRUMBSTORE|||||
13004|HW_NPORT_FSTATE_UNCORRECTABLEECCERR_CRUMBSTORE|||||
13005|HW_NPORT_FSTATE_SINGLEBITECCLIMITERR_TAGSTORE|||||
13006|HW_NPORT_FSTATE_UNCORRECTABLEECCERR_TAGSTORE|||||
13007|HW_NPORT_FSTATE_SINGLEBITECCLIMITERR_FLUSHREQSTORE|||||
13008|HW_NPORT_FSTATE_UNCORRECTABLEECCERR_FLUSHREQSTORE|||||
14001|HW_NPORT_TSTATE_TAGPOOLBUFERR|Fatal if contained else Non-fatal [lr10,ls10]||||
14002|HW_NPORT_TSTATE_CRUMBSTOREBUFERR|Fatal if contained else Non-fatal [lr10,ls10]||||
14003|HW_NPORT_TSTATE_SINGLEBITECCLIMITERR_CRUMBSTORE|||||
14004|HW_NPORT_TSTATE_UNCORRECTABLEECCERR_CRUMBSTORE|||||
14005|HW_NPORT_TSTATE_SINGLEBITECCLIMITERR_TAGSTORE|||||
14006|HW_NPORT_TSTATE_UNCORRECTABLEECCERR_TAGSTORE|||||
14007|HW_NPORT_TSTATE_TAGPOOL_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]||||
14008|HW_NPORT_TSTATE_TAGPOOL_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]||||
14009|HW_NPORT_TSTATE_CRUMBSTORE_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]||||
14010|HW_NPORT_TSTATE_CRUMBSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]||||
14011|HW_NPORT_TSTATE_COL_CRUMBSTOREBUFERR|||||
14012|HW_NPORT_TSTATE_COL_CRUMBSTORE_ECC_LIMIT_ERR|||||
14013|HW_NPORT_TSTATE_COL_CRUMBSTORE_ECC_DBE_ERR|||||
14014|HW_NPORT_TSTATE_TD_TID_RAMBUFERR|||||
14015|HW_NPORT_TSTATE_TD_TID_RAM_ECC_LIMIT_ERR|||||
14016|HW_NPORT_TSTATE_TD_TID_RAM_ECC_DBE_ERR|||||
14017|HW_NPORT_TSTATE_ATO_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|TS ATO timeout|VM|
14018|HW_NPORT_TSTATE_CAMRSP_ERR|Fatal if contained else Non-fatal [lr10,ls10]||||
15001|HW_NPORT_ROUTE_ROUTEBUFERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|route buffer over/underflow|VM|
15002|HW_NPORT_ROUTE_NOPORTDEFINEDERR|Non-fatal [lr10,ls10]||||
15003|HW_NPORT_ROUTE_INVALIDROUTEPOLICYERR|Non-fatal [lr10,ls10]||||
15004|HW_NPORT_ROUTE_ECCLIMITERR|||||
15005|HW_NPORT_ROUTE_UNCORRECTABLEECCERR|||||
15006|HW_NPORT_ROUTE_TRANSDONERESVERR|Fatal if contained else Non-fatal [lr10]|fatal (port/partition)|route transdone over/underflow|VM|
15007|HW_NPORT_ROUTE_PACKET_HEADER|||||
15008|HW_NPORT_ROUTE_GLT_ECC_LIMIT_ERR||non-fatal|Single bit ECC errors|NA|
15009|HW_NPORT_ROUTE_GLT_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|route GLT DBE|VM|
15010|HW_NPORT_ROUTE_PDCTRLPARERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|route parity|VM|
15011|HW_NPORT_ROUTE_NVS_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
15012|HW_NPORT_ROUTE_NVS_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|route incoming DBE|VM|
15013|HW_NPORT_ROUTE_CDTPARERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|route credit parity|VM|
15014|HW_NPORT_ROUTE_MCRID_ECC_LIMIT_ERR|||||
15015|HW_NPORT_ROUTE_MCRID_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
15016|HW_NPORT_ROUTE_EXTMCRID_ECC_LIMIT_ERR|||||
15017|HW_NPORT_ROUTE_EXTMCRID_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
15018|HW_NPORT_ROUTE_RAM_ECC_LIMIT_ERR|Non-fatal [ls10]||||
15019|HW_NPORT_ROUTE_RAM_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
15020|HW_NPORT_ROUTE_INVALID_MCRID_ERR|Non-fatal [ls10]||||
16001|HW_NPORT_DATAPOISONED|||||
16002|HW_NPORT_UCINTERNAL|||||
16003|HW_NPORT_CINTERNAL|||||
17001|HW_NVLCTRL_INGRESSECCSOFTLIMITERR|||||
17002|HW_NVLCTRL_INGRESSECCHDRDOUBLEBITERR|||||
17003|HW_NVLCTRL_INGRESSECCDATADOUBLEBITERR|||||
17004|HW_NVLCTRL_INGRESSBUFFERERR|||||
17005|HW_NVLCTRL_EGRESSECCSOFTLIMITERR|||||
17006|HW_NVLCTRL_EGRESSECCHDRDOUBLEBITERR|||||
17007|HW_NVLCTRL_EGRESSECCDATADOUBLEBITERR|||||
17008|HW_NVLCTRL_EGRESSBUFFERERR|||||
18001|HW_NVLIPT_DLPROTOCOL|||||
18002|HW_NVLIPT_DATAPOISONED|||||
18003|HW_NVLIPT_FLOWCONTROL|||||
18004|HW_NVLIPT_RESPONSETIMEOUT|||||
18005|HW_NVLIPT_TARGETERROR|||||
18006|HW_NVLIPT_UNEXPECTEDRESPONSE|||||
18007|HW_NVLIPT_RECEIVEROVERFLOW|||||
18008|HW_NVLIPT_MALFORMEDPACKET|||||
18009|HW_NVLIPT_STOMPEDPACKETRECEIVED|||||
18010|HW_NVLIPT_UNSUPPORTEDREQUEST|||||
18011|HW_NVLIPT_UCINTERNAL|||||
18012|HW_NVLIPT_PHYRECEIVER|||||
18013|HW_NVLIPT_BADAN0PKT|||||
18014|HW_NVLIPT_REPLAYTIMEOUT|||||
18015|HW_NVLIPT_ADVISORYERROR|||||
18016|HW_NVLIPT_CINTERNAL|||||
18017|HW_NVLIPT_HEADEROVERFLOW|||||
18018|HW_NVLIPT_RSTSEQ_PHYARB_TIMEOUT|Fatal if contained else Non-fatal [lr10]||||
18019|HW_NVLIPT_RSTSEQ_PLL_TIMEOUT|Fatal if contained else Non-fatal [lr10]||||
18020|HW_NVLIPT_CLKCTL_ILLEGAL_REQUEST|Fatal if contained else Non-fatal [lr10,ls10]||||
19001|HW_NVLTLC_TXHDRCREDITOVFERR|||||
19002|HW_NVLTLC_TXDATACREDITOVFERR|||||
19003|HW_NVLTLC_TXDLCREDITOVFERR|||||
19004|HW_NVLTLC_TXDLCREDITPARITYERR|Fatal [lr10,ls10]||||
19005|HW_NVLTLC_TXRAMHDRPARITYERR|||||
19006|HW_NVLTLC_TXRAMDATAPARITYERR|||||
19007|HW_NVLTLC_TXUNSUPVCOVFERR|||||
19008|HW_NVLTLC_TXSTOMPDET|||||
19009|HW_NVLTLC_TXPOISONDET|Fatal [lr10,ls10]||||
19010|HW_NVLTLC_TARGETERR|||||
19011|HW_NVLTLC_TX_PACKET_HEADER|||||
19012|HW_NVLTLC_UNSUPPORTEDREQUESTERR|||||
19013|HW_NVLTLC_RXDLHDRPARITYERR|Fatal [lr10,ls10]||||
19014|HW_NVLTLC_RXDLDATAPARITYERR|Fatal [lr10,ls10]||||
19015|HW_NVLTLC_RXDLCTRLPARITYERR|Fatal [lr10,ls10]||||
19016|HW_NVLTLC_RXRAMDATAPARITYERR|||||
19017|HW_NVLTLC_RXRAMHDRPARITYERR|||||
19018|HW_NVLTLC_RXINVALIDAEERR|Fatal [lr10]||||
19019|HW_NVLTLC_RXINVALIDBEERR|Fatal [lr10]||||
19020|HW_NVLTLC_RXINVALIDADDRALIGNERR|Fatal [lr10]||||
19021|HW_NVLTLC_RXPKTLENERR|Fatal [lr10,ls10]||||
19022|HW_NVLTLC_RSVCMDENCERR|Fatal [lr10]||||
19023|HW_NVLTLC_RSVDATLENENCERR|Fatal [lr10]||||
19024|HW_NVLTLC_RSVADDRTYPEERR|||||
19025|HW_NVLTLC_RSVRSPSTATUSERR|||||
19026|HW_NVLTLC_RSVPKTSTATUSERR|Fatal [lr10]||||
19027|HW_NVLTLC_RSVCACHEATTRPROBEREQERR|Fatal [lr10,ls10]||||
19028|HW_NVLTLC_RSVCACHEATTRPROBERSPERR|Fatal [lr10,ls10]||||
19029|HW_NVLTLC_DATLENGTATOMICREQMAXERR|||||
19030|HW_NVLTLC_DATLENGTRMWREQMAXERR|Fatal [lr10,ls10]||||
19031|HW_NVLTLC_DATLENLTATRRSPMINERR|Fatal [lr10,ls10]||||
19032|HW_NVLTLC_INVALIDCACHEATTRPOERR|Fatal [lr10,ls10]||||
19033|HW_NVLTLC_INVALIDCRERR|Fatal [lr10]||||
19034|HW_NVLTLC_RXRESPSTATUSTARGETERR|||||
19035|HW_NVLTLC_RXRESPSTATUSUNSUPPORTEDREQUESTERR|||||
19036|HW_NVLTLC_RXHDROVFERR|Fatal [lr10,ls10]||||
19037|HW_NVLTLC_RXDATAOVFERR|Fatal [lr10,ls10]||||
19038|HW_NVLTLC_STOMPDETERR|Fatal [lr10,ls10]||||
19039|HW_NVLTLC_RXPOISONERR|Fatal [lr10,ls10]||||
19040|HW_NVLTLC_CORRECTABLEINTERNALERR|||||
19041|HW_NVLTLC_RXUNSUPVCOVFERR|||||
19042|HW_NVLTLC_RXUNSUPNVLINKCREDITRELERR|||||
19043|HW_NVLTLC_RXUNSUPNCISOCCREDITRELERR|||||
19044|HW_NVLTLC_RX_PACKET_HEADER|||||
19045|HW_NVLTLC_RX_ERR_HEADER|||||
19046|HW_NVLTLC_TX_SYS_NCISOC_PARITY_ERR|Fatal [lr10,ls10]||||
19047|HW_NVLTLC_TX_SYS_NCISOC_HDR_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|NCISOC HDR ECC DBE Error|VM|
19048|HW_NVLTLC_TX_SYS_NCISOC_DAT_ECC_DBE_ERR|Non-fatal [ls10]; Fatal [lr10]|fatal (port/partition)|NCISOC DAT ECC DBE Error|VM|
19049|HW_NVLTLC_TX_SYS_NCISOC_ECC_LIMIT_ERR|Non-fatal [ls10]; Fatal [lr10]|non-fatal|Single bit ECC errors|NA|
19050|HW_NVLTLC_TX_SYS_TXRSPSTATUS_HW_ERR|Fatal [lr10,ls10]||||
19051|HW_NVLTLC_TX_SYS_TXRSPSTATUS_UR_ERR|Fatal [lr10,ls10]||||
19052|HW_NVLTLC_TX_SYS_TXRSPSTATUS_PRIV_ERR|Fatal [lr10,ls10]||||
19053|HW_NVLTLC_RX_SYS_NCISOC_PARITY_ERR|Fatal [lr10,ls10]||||
19054|HW_NVLTLC_RX_SYS_HDR_RAM_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|HDR RAM ECC DBE Error|VM|
19055|HW_NVLTLC_RX_SYS_HDR_RAM_ECC_LIMIT_ERR|Fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19056|HW_NVLTLC_RX_SYS_DAT0_RAM_ECC_DBE_ERR|Non-fatal [ls10]; Fatal [lr10]|fatal (port/partition)|DAT0 RAM ECC DBE Error|VM|
19057|HW_NVLTLC_RX_SYS_DAT0_RAM_ECC_LIMIT_ERR|Fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19058|HW_NVLTLC_RX_SYS_DAT1_RAM_ECC_DBE_ERR|Non-fatal [ls10]; Fatal [lr10]|fatal (port/partition)|DAT1 RAM ECC DBE Error|VM|
19059|HW_NVLTLC_RX_SYS_DAT1_RAM_ECC_LIMIT_ERR|Fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19060|HW_NVLTLC_TX_LNK_CREQ_RAM_HDR_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|CREQ RAM HDR ECC DBE Error|VM|
19061|HW_NVLTLC_TX_LNK_CREQ_RAM_DAT_ECC_DBE_ERR|Non-fatal [lr10,ls10]|fatal (port/partition)|CREQ RAM DAT ECC DBE Error|VM|
19062|HW_NVLTLC_TX_LNK_CREQ_RAM_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19063|HW_NVLTLC_TX_LNK_RSP_RAM_HDR_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|Response RAM HDR ECC DBE Error|VM|
19064|HW_NVLTLC_TX_LNK_RSP_RAM_DAT_ECC_DBE_ERR|Non-fatal [lr10,ls10]|fatal (port/partition)|Response RAM DAT ECC DBE Error|VM|
19065|HW_NVLTLC_TX_LNK_RSP_RAM_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19066|HW_NVLTLC_TX_LNK_COM_RAM_HDR_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|COM RAM HDR ECC DBE Error|VM|
19067|HW_NVLTLC_TX_LNK_COM_RAM_DAT_ECC_DBE_ERR|Non-fatal [lr10,ls10]|fatal (port/partition)|COM RAM DAT ECC DBE Error|VM|
19068|HW_NVLTLC_TX_LNK_COM_RAM_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19069|HW_NVLTLC_TX_LNK_RSP1_RAM_HDR_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|RSP1 RAM HDR ECC DBE Error|VM|
19070|HW_NVLTLC_TX_LNK_RSP1_RAM_DAT_ECC_DBE_ERR|Fatal [lr10,ls10]|fatal (port/partition)|RSP1 RAM DAT ECC DBE Error|VM|
19071|HW_NVLTLC_TX_LNK_RSP1_RAM_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
19072|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC0|Non-fatal [lr10,ls10]||||
19073|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC1|Non-fatal [lr10,ls10]||||
19074|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC2|Non-fatal [lr10,ls10]||||
19075|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC3|Non-fatal [lr10,ls10]||||
19076|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC4|Non-fatal [lr10,ls10]||||
19077|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC5|Non-fatal [lr10,ls10]||||
19078|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC6|Non-fatal [lr10,ls10]||||
19079|HW_NVLTLC_TX_LNK_AN1_TIMEOUT_VC7|Non-fatal [lr10,ls10]||||
19080|HW_NVLTLC_RX_LNK_RXRSPSTATUS_HW_ERR|Fatal [lr10,ls10]||||
19081|HW_NVLTLC_RX_LNK_RXRSPSTATUS_UR_ERR|Fatal [lr10,ls10]||||
19082|HW_NVLTLC_RX_LNK_RXRSPSTATUS_PRIV_ERR|Non-fatal [lr10,ls10]||||
19083|HW_NVLTLC_RX_LNK_INVALID_COLLAPSED_RESPONSE_ERR|Fatal [lr10,ls10]||||
19084|HW_NVLTLC_RX_LNK_AN1_HEARTBEAT_TIMEOUT_ERR|Non-fatal [lr10,ls10]|non-fatal|AN1 Heartbeat Timeout Error|RESET_ALL|
20001|HW_DLPL_TX_REPLAY|Non-fatal [lr10,ls10]|non-fatal|TX Replay Error|NA|
20002|HW_DLPL_TX_RECOVERY_SHORT|Non-fatal [lr10,ls10]||||
20003|HW_DLPL_TX_RECOVERY_LONG|||||
20004|HW_DLPL_TX_FAULT_RAM|Fatal [lr10,ls10]||||
20005|HW_DLPL_TX_FAULT_INTERFACE|Fatal [lr10,ls10]||||
20006|HW_DLPL_TX_FAULT_SUBLINK_CHANGE|Fatal [lr10,ls10]||||
20007|HW_DLPL_RX_FAULT_SUBLINK_CHANGE|Fatal [lr10,ls10]||||
20008|HW_DLPL_RX_FAULT_DL_PROTOCOL|Fatal [lr10,ls10]||||
20009|HW_DLPL_RX_SHORT_ERROR_RATE|Non-fatal [lr10,ls10]|gpud only|RX Short Error Rate||
20010|HW_DLPL_RX_LONG_ERROR_RATE|Non-fatal [lr10,ls10]||||
20011|HW_DLPL_RX_ILA_TRIGGER|Non-fatal [lr10,ls10]||||
20012|HW_DLPL_RX_CRC_COUNTER|Non-fatal [lr10,ls10]|non-fatal|Broken/inconsistent connection|LINK|
20013|HW_DLPL_LTSSM_FAULT|||||
20014|HW_DLPL_LTSSM_PROTOCOL|Fatal [lr10,ls10]||||
20015|HW_DLPL_MINION_REQUEST|||||
20016|HW_DLPL_FIFO_DRAIN_ERR|||||
20017|HW_DLPL_CONST_DET_ERR|||||
20018|HW_DLPL_OFF2SAFE_LINK_DET_ERR|||||
20019|HW_DLPL_SAFE2NO_LINK_DET_ERR|||||
20020|HW_DLPL_SCRAM_LOCK_ERR|||||
20021|HW_DLPL_SYM_LOCK_ERR|||||
20022|HW_DLPL_SYM_ALIGN_END_ERR|||||
20023|HW_DLPL_FIFO_SKEW_ERR|||||
20024|HW_DLPL_TRAIN2SAFE_LINK_DET_ERR|||||
20025|HW_DLPL_HS2SAFE_LINK_DET_ERR|||||
20026|HW_DLPL_FENCE_ERR|||||
20027|HW_DLPL_SAFE_NO_LD_ERR|||||
20028|HW_DLPL_E2SAFE_LD_ERR|||||
20029|HW_DLPL_RC_RXPWR_ERR|||||
20030|HW_DLPL_RC_TXPWR_ERR|||||
20031|HW_DLPL_RC_DEADLINE_ERR|||||
20032|HW_DLPL_TX_HS2LP_ERR|||||
20033|HW_DLPL_RX_HS2LP_ERR|||||
20034|HW_DLPL_LTSSM_FAULT_UP|Fatal [lr10,ls10]|fatal (port/partition)|LTSSM Fault Up|VM|
20035|HW_DLPL_LTSSM_FAULT_DOWN|Fatal [lr10,ls10]||||
20036|HW_DLPL_PHY_A|Fatal [ls10]||||
20037|HW_DLPL_TX_PL_ERROR|Fatal [ls10]||||
20038|HW_DLPL_RX_PL_ERROR|Fatal [ls10]||||
21001|HW_AFS_UC_INGRESS_CREDIT_OVERFLOW|||||
21002|HW_AFS_UC_INGRESS_CREDIT_UNDERFLOW|||||
21003|HW_AFS_UC_EGRESS_CREDIT_OVERFLOW|||||
21004|HW_AFS_UC_EGRESS_CREDIT_UNDERFLOW|||||
21005|HW_AFS_UC_INGRESS_NON_BURSTY_PKT_DETECTED|||||
21006|HW_AFS_UC_INGRESS_NON_STICKY_PKT_DETECTED|||||
21007|HW_AFS_UC_INGRESS_BURST_GT_17_DATA_VC_DETECTED|||||
21008|HW_AFS_UC_INGRESS_BURST_GT_1_NONDATA_VC_DETECTED|||||
21009|HW_AFS_UC_INVALID_DST|||||
21010|HW_AFS_UC_PKT_MISROUTE|||||
22001|HW_MINION_UCODE_IMEM|||||
22002|HW_MINION_UCODE_DMEM|||||
22003|HW_MINION_HALT|Fatal [lr10,ls10]|always fatal|Minion Halt|HOST|
22004|HW_MINION_BOOT_ERROR|||||
22005|HW_MINION_TIMEOUT|||||
22006|HW_MINION_DLCMD_FAULT|Non-fatal [ls10]||||
22007|HW_MINION_DLCMD_TIMEOUT|Non-fatal [ls10]||||
22008|HW_MINION_DLCMD_FAIL|||||
22009|HW_MINION_FATAL_INTR|||||
22010|HW_MINION_WATCHDOG|Fatal [lr10,ls10]||||
22011|HW_MINION_EXTERR|Fatal [lr10,ls10]|always fatal|Minion exterror|HOST|
22012|HW_MINION_FATAL_LINK_INTR|Fatal [lr10,ls10]|fatal (port/partition)|Minion Link NA interrupt|LINK|
22013|HW_MINION_NONFATAL|Non-fatal [lr10,ls10]|non-fatal|Minion Link DLREQ interrupt|NA|
23001|HW_NXBAR_TILE_INGRESS_BUFFER_OVERFLOW|Fatal [lr10,ls10]|always fatal|ingress SRC-VC buffer overflow|HOST|
23002|HW_NXBAR_TILE_INGRESS_BUFFER_UNDERFLOW|Fatal [lr10,ls10]|always fatal|ingress SRC-VC buffer underflow|HOST|
23003|HW_NXBAR_TILE_EGRESS_CREDIT_OVERFLOW|Fatal [lr10,ls10]|always fatal|egress DST-VC credit overflow|HOST|
23004|HW_NXBAR_TILE_EGRESS_CREDIT_UNDERFLOW|Fatal [lr10,ls10]|always fatal|egress DST-VC credit underflow|HOST|
23005|HW_NXBAR_TILE_INGRESS_NON_BURSTY_PKT|Fatal [lr10,ls10]|always fatal|ingress packet burst error|HOST|
23006|HW_NXBAR_TILE_INGRESS_NON_STICKY_PKT|Fatal [lr10,ls10]|always fatal|ingress packet sticky error|HOST|
23007|HW_NXBAR_TILE_INGRESS_BURST_GT_9_DATA_VC|Fatal [lr10,ls10]|always fatal|possible bubbles at ingress|HOST|
23008|HW_NXBAR_TILE_INGRESS_PKT_INVALID_DST|Fatal [lr10,ls10]|always fatal|ingress packet invalid dst error|HOST|
23009|HW_NXBAR_TILE_INGRESS_PKT_PARITY_ERROR|Fatal [lr10,ls10]|always fatal|ingress packet parity error|HOST|
23010|HW_NXBAR_TILEOUT_INGRESS_BUFFER_OVERFLOW|Fatal [lr10,ls10]|always fatal|ingress SRC-VC buffer overflow|HOST|
23011|HW_NXBAR_TILEOUT_INGRESS_BUFFER_UNDERFLOW|Fatal [lr10,ls10]|always fatal|ingress SRC-VC buffer underflow|HOST|
23012|HW_NXBAR_TILEOUT_EGRESS_CREDIT_OVERFLOW|Fatal [lr10,ls10]|always fatal|egress DST-VC credit overflow|HOST|
23013|HW_NXBAR_TILEOUT_EGRESS_CREDIT_UNDERFLOW|Fatal [lr10,ls10]|always fatal|egress DST-VC credit underflow|HOST|
23014|HW_NXBAR_TILEOUT_INGRESS_NON_BURSTY_PKT|Fatal [lr10,ls10]|always fatal|ingress packet burst error|HOST|
23015|HW_NXBAR_TILEOUT_INGRESS_NON_STICKY_PKT|Fatal [lr10,ls10]|always fatal|ingress packet sticky error|HOST|
23016|HW_NXBAR_TILEOUT_INGRESS_BURST_GT_9_DATA_VC|Fatal [lr10,ls10]|always fatal|possible bubbles at ingress|HOST|
23017|HW_NXBAR_TILEOUT_EGRESS_CDT_PARITY_ERROR|Fatal [lr10,ls10]|always fatal|ingress credit parity error|HOST|
24001|HW_NPORT_SOURCETRACK_CREQ_TCEN0_CRUMBSTORE_ECC_LIMIT_ERR|Non-fatal [lr10,ls10]|non-fatal|Single bit ECC errors|NA|
24002|HW_NPORT_SOURCETRACK_CREQ_TCEN0_TD_CRUMBSTORE_ECC_LIMIT_ERR||non-fatal|Single bit ECC errors|NA|
24003|HW_NPORT_SOURCETRACK_CREQ_TCEN1_CRUMBSTORE_ECC_LIMIT_ERR|Non-fatal [lr10]|non-fatal|Single bit ECC errors|NA|
24004|HW_NPORT_SOURCETRACK_CREQ_TCEN0_CRUMBSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|sourcetrack TCEN0 crubmstore DBE|VM|
24005|HW_NPORT_SOURCETRACK_CREQ_TCEN0_TD_CRUMBSTORE_ECC_DBE_ERR||fatal (port/partition)|sourcetrack TCEN0 TD crubmstore DBE|VM|
24006|HW_NPORT_SOURCETRACK_CREQ_TCEN1_CRUMBSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [lr10]|fatal (port/partition)|sourcetrack TCEN1 crubmstore DBE|VM|
24007|HW_NPORT_SOURCETRACK_SOURCETRACK_TIME_OUT_ERR|Fatal if contained else Non-fatal [lr10,ls10]|fatal (port/partition)|sourcetrack timeout error|VM|
24008|HW_NPORT_SOURCETRACK_DUP_CREQ_TCEN0_TAG_ERR|Fatal if contained else Non-fatal [ls10]||||
24009|HW_NPORT_SOURCETRACK_INVALID_TCEN0_RSP_ERR|Fatal if contained else Non-fatal [ls10]||||
24010|HW_NPORT_SOURCETRACK_INVALID_TCEN1_RSP_ERR|Fatal if contained else Non-fatal [ls10]||||
25001|HW_NVLIPT_LNK_ILLEGALLINKSTATEREQUEST|Non-fatal [lr10,ls10]||||
25002|HW_NVLIPT_LNK_FAILEDMINIONREQUEST|Non-fatal [lr10,ls10]||||
25003|HW_NVLIPT_LNK_RESERVEDREQUESTVALUE|Non-fatal [lr10,ls10]||||
25004|HW_NVLIPT_LNK_LINKSTATEWRITEWHILEBUSY|Non-fatal [lr10,ls10]||||
25005|HW_NVLIPT_LNK_LINK_STATE_REQUEST_TIMEOUT|Non-fatal [lr10,ls10]||||
25006|HW_NVLIPT_LNK_WRITE_TO_LOCKED_SYSTEM_REG_ERR|Non-fatal [lr10,ls10]||||
25007|HW_NVLIPT_LNK_SLEEPWHILEACTIVELINK|Fatal [lr10,ls10]||||
25008|HW_NVLIPT_LNK_RSTSEQ_PHYCTL_TIMEOUT|Fatal [lr10,ls10]||||
25009|HW_NVLIPT_LNK_RSTSEQ_CLKCTL_TIMEOUT|Fatal [lr10,ls10]||||
25010|HW_NVLIPT_LNK_ALI_TRAINING_FAIL|||||free
26001|HW_SOE_RESET|||||free
26002|HW_SOE_BOOTSTRAP|||||free
26003|HW_SOE_COMMAND_QUEUE|||||free
26004|HW_SOE_TIMEOUT|||||free
26005|HW_SOE_SHUTDOWN|||||
26006|HW_SOE_HALT|||||free
26007|HW_SOE_EXTERR|||||free
26008|HW_SOE_WATCHDOG|||||free
27001|HW_CCI_RESET|||||free
27002|HW_CCI_INIT|||||free
27003|HW_CCI_TIMEOUT|||||
27004|HW_CCI_SHUTDOWN|||||free
27005|HW_CCI_MODULE|||||free
27006|HW_CCI_MODULE_BOOT|||||free
27007|HW_CCI_MODULE_RECOVERY|||||free
28001|HW_OSFP_THERM_WARN_ACTIVATED|||||free
28002|HW_OSFP_THERM_WARN_DEACTIVATED|||||free
28003|HW_OSFP_THERM_OVERT_ACTIVATED|||||free
28004|HW_OSFP_THERM_OVERT_DEACTIVATED|||||free
28005|HW_OSFP_THERM_HEARTBEAT_SHUTDOWN|||||free
29001|HW_NPORT_MULTICASTTSTATE_TAGPOOL_ECC_LIMIT_ERR|Non-fatal [ls10]||||
29002|HW_NPORT_MULTICASTTSTATE_TAGPOOL_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
29003|HW_NPORT_MULTICASTTSTATE_CRUMBSTORE_ECC_LIMIT_ERR|Non-fatal [ls10]||||
29004|HW_NPORT_MULTICASTTSTATE_CRUMBSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
29005|HW_NPORT_MULTICASTTSTATE_CRUMBSTORE_BUF_OVERWRITE_ERR|Fatal if contained else Non-fatal [ls10]||||
29006|HW_NPORT_MULTICASTTSTATE_CRUMBSTORE_MCTO_ERR|Non-fatal [ls10]||||
30001|HW_NPORT_REDUCTIONTSTATE_TAGPOOL_ECC_LIMIT_ERR|Non-fatal [ls10]||||
30002|HW_NPORT_REDUCTIONTSTATE_TAGPOOL_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
30003|HW_NPORT_REDUCTIONTSTATE_CRUMBSTORE_ECC_LIMIT_ERR|Non-fatal [ls10]||||
30004|HW_NPORT_REDUCTIONTSTATE_CRUMBSTORE_ECC_DBE_ERR|Fatal if contained else Non-fatal [ls10]||||
30005|HW_NPORT_REDUCTIONTSTATE_CRUMBSTORE_BUF_OVERWRITE_ERR|Fatal if contained else Non-fatal [ls10]||||
30006|HW_NPORT_REDUCTIONTSTATE_CRUMBSTORE_RTO_ERR|Non-fatal [ls10]||||
"""


@dataclass(frozen=True)
class SXid:
    """One SXid number: its driver name, the driver's tag, and the Fabric Manager guide's class, name and recovery."""

    number: int
    name: str
    driver_tag: str
    fm_class: (
        str  # "non-fatal", "fatal (port/partition)", "always fatal", "other notable", "gpud only", or ""
    )
    fm_name: str
    recovery: str
    free_text: bool

    @property
    def tag_class(self) -> str:
        """The driver's tag in one word: "fatal", "nonfatal", "contained" (fatal only if contained), "differs" (by
        chip generation), or "" (no tagged report)."""
        tag = self.driver_tag
        if not tag or tag == "untagged":
            return ""
        if ";" in tag:  # 10001 is also logged untagged with Severity 1; 19048 etc. differ by chip
            return "differs"
        if tag.startswith("Fatal if contained"):
            return "contained"
        return "fatal" if tag.startswith("Fatal") else "nonfatal"


def _row(line: str) -> SXid:
    number, name, tag, fm_class, fm_name, recovery, free = line.split("|")
    return SXid(int(number), name, tag, fm_class, fm_name, RECOVERY[recovery], free == "free")


SXIDS: dict[int, SXid] = {row.number: row for row in map(_row, _TABLE.splitlines())}
